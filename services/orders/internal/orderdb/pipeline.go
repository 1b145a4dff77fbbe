package orderdb

// The SQL of the queries orderapp queues in a pipeline (pgpipe.QueueRow)
// rather than sends through Queries: their generated methods read their
// results at once.
var (
	// TryLockIdempotencyKeySQL takes $1 merchant, $2 scope, $3 key and
	// returns acquired (bool).
	TryLockIdempotencyKeySQL = tryLockIdempotencyKey
)
