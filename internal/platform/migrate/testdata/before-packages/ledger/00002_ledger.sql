-- +goose Up
-- Double-entry bookkeeping. Every journal entry has postings that sum to zero
-- per currency (checked at commit by postings_balanced); an account's balance
-- per currency is the sum of its postings, kept in balances.
CREATE TABLE accounts (
    id         text        PRIMARY KEY,  -- customer:<customer id> or merchant:<merchant id>
    kind       text        NOT NULL CHECK (kind IN ('customer_funds', 'merchant_payable')),
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE balances (
    account_id text        NOT NULL REFERENCES accounts (id),
    currency   text        NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    balance    bigint      NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, currency)
);

-- What the ledger knows of an order: who pays whom, so a refund (whose event
-- names only the order) can post its reversal.
CREATE TABLE ledger_orders (
    order_id         text        PRIMARY KEY,
    customer_account text        NOT NULL REFERENCES accounts (id),
    merchant_account text        NOT NULL REFERENCES accounts (id),
    currency         text        NOT NULL,
    captured_amount  bigint      NOT NULL DEFAULT 0,
    refunded_amount  bigint      NOT NULL DEFAULT 0,
    created_at       timestamptz NOT NULL DEFAULT now()
);

-- One entry per applied event. event_id is indexed but deliberately NOT
-- unique: the inbox is the one dedupe guard. A second unique guard here would
-- hide the duplicate effects that INBOX_ENABLED=false exists to demonstrate
-- (docs/consumers.md); with the inbox on, tests assert one entry per event.
CREATE TABLE journal_entries (
    id         bigserial   PRIMARY KEY,
    event_id   uuid        NOT NULL,
    order_id   text        NOT NULL,
    kind       text        NOT NULL CHECK (kind IN ('capture', 'refund')),
    refund_id  text,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX journal_entries_event_id_idx ON journal_entries (event_id);
CREATE INDEX journal_entries_order_id_idx ON journal_entries (order_id);

-- amount is signed: credits positive, debits negative.
CREATE TABLE postings (
    id         bigserial   PRIMARY KEY,
    entry_id   bigint      NOT NULL REFERENCES journal_entries (id),
    account_id text        NOT NULL REFERENCES accounts (id),
    currency   text        NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    amount     bigint      NOT NULL CHECK (amount <> 0),
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX postings_entry_id_idx ON postings (entry_id);
CREATE INDEX postings_account_id_idx ON postings (account_id, currency);

-- +goose StatementBegin
CREATE FUNCTION postings_balanced() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM postings WHERE entry_id = NEW.entry_id
               GROUP BY currency HAVING sum(amount) <> 0) THEN
        RAISE EXCEPTION 'journal entry % does not balance', NEW.entry_id
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE CONSTRAINT TRIGGER postings_balanced AFTER INSERT ON postings
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION postings_balanced();

-- +goose Down
DROP TABLE postings;
DROP FUNCTION postings_balanced();
DROP TABLE journal_entries;
DROP TABLE ledger_orders;
DROP TABLE balances;
DROP TABLE accounts;
