package relaycmd

import (
	"github.com/paylab/paylab/internal/platform/chaos"
	"github.com/paylab/paylab/pkg/outbox"
)

// faultHooks attach the relay's chaos fault points to its step boundaries.
var faultHooks = outbox.Hooks{
	AfterLease:             chaos.NewPoint("relay.after_lease").Hit,
	AfterPublishBeforeMark: chaos.NewPoint("relay.after_publish_before_mark").Hit,
}
