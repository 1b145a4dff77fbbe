-- +goose Up
-- One row per receipt email sent. event_id is indexed but deliberately NOT
-- unique: the inbox is the one dedupe guard, and INBOX_ENABLED=false must be
-- able to show a duplicate send (docs/consumers.md).
CREATE TABLE notifications (
    id          bigserial   PRIMARY KEY,
    event_id    uuid        NOT NULL,
    order_id    text        NOT NULL,
    kind        text        NOT NULL CHECK (kind IN ('capture_receipt', 'refund_receipt')),
    customer_id text        NOT NULL,
    recipient   text        NOT NULL,
    message_id  text        NOT NULL,
    subject     text        NOT NULL,
    sent_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX notifications_event_id_idx ON notifications (event_id);
CREATE INDEX notifications_order_id_idx ON notifications (order_id);

-- +goose Down
DROP TABLE notifications;
