package reconcile

import "slices"

// Since returns what changed from base to r: the effects of what happened in
// between, on a system that was already running at base (a long-lived
// deployment, whose history the counts would otherwise carry). base must be
// a settled report, so nothing of its own was still in flight.
//
// The outbox's backlog is a state, not a running count: subtracting base's
// pending rows would let rows that drained since hide rows left pending
// since. So the outbox is r's, less the rows that were in it at base (ids
// up to base's high-water mark): one of those still pending was pending at
// base too — base's own fault, named by base's violations — and counting it
// again would fail everything that follows for one old fault.
func (r Report) Since(base Report) Report {
	out := Report{
		Captures:      r.Captures - base.Captures,
		Refunds:       r.Refunds - base.Refunds,
		Ledger:        r.Ledger.since(base.Ledger),
		Notifications: r.Notifications.since(base.Notifications),
		Outbox:        r.Outbox.after(base.Outbox.HighWater),
		Settled:       r.Settled,
	}
	for _, m := range []map[string]int{r.Unbalanced, base.Unbalanced} {
		for c := range m {
			if d := r.Unbalanced[c] - base.Unbalanced[c]; d != 0 {
				if out.Unbalanced == nil {
					out.Unbalanced = map[string]int{}
				}
				out.Unbalanced[c] = d
			}
		}
	}
	if r.Wire != nil {
		w := *r.Wire
		if base.Wire != nil {
			w.Messages -= base.Wire.Messages
			w.Distinct -= base.Wire.Distinct
			w.Duplicates -= base.Wire.Duplicates
			w.OutOfOrder -= base.Wire.OutOfOrder
			before := map[int32]PartitionWire{}
			for _, b := range base.Wire.Partitions {
				before[b.Partition] = b
			}
			w.Partitions = slices.Clone(w.Partitions)
			for i := range w.Partitions {
				b := before[w.Partitions[i].Partition]
				w.Partitions[i].Messages -= b.Messages
				w.Partitions[i].Duplicates -= b.Duplicates
				w.Partitions[i].OutOfOrder -= b.OutOfOrder
			}
		}
		out.Wire = &w
		out.InboxAbsorbed = max(0, w.Duplicates-out.Ledger.Duplicate)
	}
	return out
}

func (e Effects) since(base Effects) Effects {
	return Effects{
		Expected:   e.Expected - base.Expected,
		Applied:    e.Applied - base.Applied,
		Lost:       e.Lost - base.Lost,
		Duplicate:  e.Duplicate - base.Duplicate,
		Phantom:    e.Phantom - base.Phantom,
		OutOfOrder: e.OutOfOrder - base.OutOfOrder,
	}
}
