package chaosrun

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/internal/lab/loadgen"
	"github.com/paylab/paylab/internal/platform/apikey"
)

// apiKeys are the API keys a deployment's load is placed with, one per
// merchant of the load generator, created in its orders database (as its
// owner, like paylab keys) the first time they are needed.
type apiKeys struct {
	once sync.Once
	keys loadgen.Keys
	err  error
}

// Keys returns the deployment's API keys, creating them once.
func (d *Deployment) Keys(ctx context.Context) (loadgen.Keys, error) {
	d.apiKeys.once.Do(func() {
		conn, err := pgx.Connect(ctx, d.Src.OrdersURL)
		if err != nil {
			d.apiKeys.err = fmt.Errorf("creating API keys: %w", err)
			return
		}
		defer conn.Close(context.WithoutCancel(ctx))
		d.apiKeys.keys, d.apiKeys.err = loadgen.IssueKeys(ctx, apikey.NewStore(conn))
	})
	return d.apiKeys.keys, d.apiKeys.err
}
