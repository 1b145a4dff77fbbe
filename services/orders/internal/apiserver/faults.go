package apiserver

import (
	"context"

	"github.com/paylab/paylab/internal/platform/chaos"
	"github.com/paylab/paylab/services/orders/internal/orderapp"
)

// The orders API's fault points, one per step boundary (orderapp.Step).
var (
	beforeCommit             = chaos.NewPoint(string(orderapp.StepBeforeCommit))
	afterCommitBeforePublish = chaos.NewPoint(string(orderapp.StepAfterCommitBeforePublish))
	afterPublishBeforeCommit = chaos.NewPoint(string(orderapp.StepAfterPublishBeforeCommit))
)

// faultHooks attaches the fault points to the step boundaries.
func faultHooks() orderapp.Hooks {
	hit := func(p *chaos.Point) func(context.Context, orderapp.Op) error {
		return func(ctx context.Context, _ orderapp.Op) error { return p.Hit(ctx) }
	}
	return orderapp.Hooks{
		BeforeCommit:             hit(beforeCommit),
		AfterCommitBeforePublish: hit(afterCommitBeforePublish),
		AfterPublishBeforeCommit: hit(afterPublishBeforeCommit),
	}
}
