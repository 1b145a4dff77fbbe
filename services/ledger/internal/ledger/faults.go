package ledger

// Named fault points: step boundaries where a chaos controller (or a test)
// can crash, fail or delay the process.
const (
	// FaultAfterApplyBeforeOffsetCommit: the journal entry and the inbox mark
	// have committed; the Kafka offset is not marked yet. A crash here makes
	// Kafka re-deliver the event, which the inbox then skips.
	FaultAfterApplyBeforeOffsetCommit = "ledger.after_apply_before_offset_commit"
	// FaultAfterApplyBeforeCommit: a batch's journal entries and inbox rows
	// are written; its transaction has not committed. A crash here rolls the
	// whole batch back and Kafka re-delivers every message of it.
	FaultAfterApplyBeforeCommit = "ledger.after_apply_before_commit"
)
