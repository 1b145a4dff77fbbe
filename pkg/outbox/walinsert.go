package outbox

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/google/uuid"
)

// insert decodes a pgoutput Insert message, src being the message after its
// type byte 'I': the relation id (uint32), 'N', and the new tuple: the
// column count (uint16) and, per column, its kind ('n' null, 'u' unchanged
// TOAST, 't' text, 'b' binary), then, for 't' and 'b', its length (int32)
// and its bytes. ok is false for another table's insert. A row that cannot
// become an Event (undecodable headers) comes back with err set, to be
// parked as the polling relay parks it; a message that does not match the
// relation the stream described is an error.
//
// The event's text columns (aggregate type and id, type, topic, headers)
// become one string, sliced per column, and its payload one byte slice:
// two allocations, plus the headers' map when there are headers.
func (d *walDecoder) insert(src []byte) (e walEvent, ok bool, err error) {
	if len(src) < 7 {
		return e, true, fmt.Errorf("an insert message of %d bytes", len(src))
	}
	relID := binary.BigEndian.Uint32(src)
	rel, described := d.relations[relID]
	if !described {
		// pgoutput describes a relation before its first change in a
		// session: an insert it did not describe cannot be told apart from
		// an outbox insert, and skipping it could skip an event.
		return e, true, fmt.Errorf("an insert into relation %d, which the stream has not described", relID)
	}
	if rel == nil {
		return e, false, nil
	}
	if src[4] != 'N' {
		return e, true, fmt.Errorf("an insert's tuple of kind %q, want 'N'", src[4])
	}
	if n := int(binary.BigEndian.Uint16(src[5:])); n != len(rel.columns) {
		return e, true, fmt.Errorf("an outbox insert of %d columns, where the relation has %d", n, len(rel.columns))
	}
	var raw [numWALColumns][]byte
	p := 7
	for _, k := range rel.columns {
		if p >= len(src) {
			return e, true, fmt.Errorf("an outbox insert truncated at byte %d", p)
		}
		kind := src[p]
		p++
		var data []byte
		switch kind {
		case 'b', 't':
			if len(src)-p < 4 {
				return e, true, fmt.Errorf("an outbox insert truncated at byte %d", p)
			}
			n := binary.BigEndian.Uint32(src[p:])
			p += 4
			if uint64(n) > uint64(len(src)-p) {
				return e, true, fmt.Errorf("an outbox insert's column of %d bytes, with %d left", n, len(src)-p)
			}
			data = src[p : p+int(n)]
			p += int(n)
		case 'n', 'u':
		default:
			return e, true, fmt.Errorf("an outbox insert's column of unknown kind %q", kind)
		}
		if k < 0 {
			continue // a column the relay does not read
		}
		if kind != 'b' {
			return e, true, fmt.Errorf("column %s: tuple data kind %q, want binary", walColumns[k].name, kind)
		}
		raw[k] = data
	}
	if p != len(src) {
		return e, true, fmt.Errorf("an outbox insert with %d bytes after its last column", len(src)-p)
	}
	for _, f := range fixedWidth {
		if len(raw[f.col]) != f.n {
			return e, true, fmt.Errorf("column %s: %d bytes, want %d", walColumns[f.col].name, len(raw[f.col]), f.n)
		}
	}
	e.id = int64(binary.BigEndian.Uint64(raw[colID]))
	e.createdAt = pgTime(raw[colCreatedAt])
	payload, err := jsonbText(raw[colPayload])
	if err != nil {
		return e, true, fmt.Errorf("payload of outbox row %d: %w", e.id, err)
	}
	headers, err := jsonbText(raw[colHeaders])
	if err != nil {
		return e, true, fmt.Errorf("headers of outbox row %d: %w", e.id, err)
	}
	// One string for the text columns; src is the connection's buffer,
	// reused by the next message, so everything kept is copied.
	b := d.scratch[:0]
	for _, k := range [...]int{colAggregateType, colAggregateID, colEventType, colTopic} {
		b = append(b, raw[k]...)
	}
	b = append(b, headers...)
	d.scratch = b
	text := string(b)
	cut := func(n int) string {
		s := text[:n]
		text = text[n:]
		return s
	}
	e.event = Event{
		ID:            uuid.UUID(raw[colEventID]),
		AggregateType: cut(len(raw[colAggregateType])),
		AggregateID:   cut(len(raw[colAggregateID])),
		Type:          cut(len(raw[colEventType])),
		SchemaVersion: int(int32(binary.BigEndian.Uint32(raw[colSchemaVersion]))),
		Sequence:      int64(binary.BigEndian.Uint64(raw[colSequence])),
		Topic:         cut(len(raw[colTopic])),
		Payload:       append(json.RawMessage(nil), payload...),
		OccurredAt:    pgTime(raw[colOccurredAt]),
	}
	if e.event.Headers, err = decodeHeaders(text); err != nil {
		e.err = Permanent(fmt.Errorf("decoding the headers of event %s: %w", e.event.ID, err))
	}
	return e, true, nil
}

// decodeHeaders decodes an event's stored headers, a JSON object of strings
// as PostgreSQL renders jsonb. "{}" (the column's default) is no headers.
// The usual object — string keys and values without escapes — is read
// here, its keys and values slices of s; anything else goes to
// json.Unmarshal, which decodes it or says why it cannot.
func decodeHeaders(s string) (map[string]string, error) {
	if s == "" || s == "{}" {
		return nil, nil
	}
	if h, ok := flatStrings(s); ok {
		return h, nil
	}
	var h map[string]string
	if err := json.Unmarshal([]byte(s), &h); err != nil {
		return nil, err
	}
	return h, nil
}

// flatStrings reads s as a JSON object whose keys and values are strings
// without escapes or control characters, in valid UTF-8; ok is false for
// anything else.
func flatStrings(s string) (h map[string]string, ok bool) {
	i := skipSpace(s, 0)
	if i >= len(s) || s[i] != '{' {
		return nil, false
	}
	i = skipSpace(s, i+1)
	if i < len(s) && s[i] == '}' {
		return nil, skipSpace(s, i+1) == len(s)
	}
	for {
		var k, v string
		if k, i, ok = plainString(s, i); !ok {
			return nil, false
		}
		if i = skipSpace(s, i); i >= len(s) || s[i] != ':' {
			return nil, false
		}
		if v, i, ok = plainString(s, skipSpace(s, i+1)); !ok {
			return nil, false
		}
		if h == nil {
			h = make(map[string]string, 1)
		}
		h[k] = v // a repeated key: the last wins, as with json.Unmarshal
		if i = skipSpace(s, i); i >= len(s) {
			return nil, false
		}
		switch s[i] {
		case ',':
			i = skipSpace(s, i+1)
		case '}':
			return h, skipSpace(s, i+1) == len(s)
		default:
			return nil, false
		}
	}
}

// plainString reads the JSON string at s[i] if it has no escapes, no
// control characters and is valid UTF-8; next is the index after it.
func plainString(s string, i int) (v string, next int, ok bool) {
	if i >= len(s) || s[i] != '"' {
		return "", 0, false
	}
	ascii := true
	for j := i + 1; j < len(s); j++ {
		switch c := s[j]; {
		case c == '"':
			v = s[i+1 : j]
			if !ascii && !utf8.ValidString(v) {
				return "", 0, false
			}
			return v, j + 1, true
		case c == '\\' || c < 0x20:
			return "", 0, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return "", 0, false
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}
