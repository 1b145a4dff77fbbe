package ledger

// Named fault points: step boundaries where a chaos controller (or a test)
// can crash, fail or delay the process.
const (
	// FaultAfterApplyBeforeOffsetCommit: the journal entry and the inbox mark
	// have committed; the Kafka offset is not marked yet. A crash here makes
	// Kafka re-deliver the event, which the inbox then skips. An error leaves
	// the offset unmarked and the event is delivered again after the retry
	// backoff, a failed attempt like a handler error: the inbox skips it as
	// a duplicate (with the inbox off it is applied again).
	FaultAfterApplyBeforeOffsetCommit = "ledger.after_apply_before_offset_commit"
	// FaultAfterApplyBeforeCommit: a batch's journal entries and inbox rows
	// are written; its transaction has not committed. A crash here rolls the
	// whole batch back and Kafka re-delivers every message of it. An error
	// fails the batch as a handler error does: it is rolled back and its
	// events retried one by one, each dead-lettered once its attempts run
	// out.
	FaultAfterApplyBeforeCommit = "ledger.after_apply_before_commit"
)
