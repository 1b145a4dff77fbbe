package console

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/internal/lab/loadgen"
	"github.com/paylab/paylab/internal/platform/apikey"
)

// apiKeys are the API keys the console places payments with, one per
// merchant of the load generator, created in the deployment's orders
// database (as its owner, like paylab keys) when payments are first placed.
type apiKeys struct {
	mu   sync.Mutex
	keys loadgen.Keys
}

// get returns the keys for the orders database at ordersURL, creating them
// the first time.
func (k *apiKeys) get(ctx context.Context, ordersURL string) (loadgen.Keys, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.keys.ByMerchant != nil {
		return k.keys, nil
	}
	conn, err := pgx.Connect(ctx, ordersURL)
	if err != nil {
		return loadgen.Keys{}, fmt.Errorf("creating API keys: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	keys, err := loadgen.IssueKeys(ctx, apikey.NewStore(conn))
	if err != nil {
		return loadgen.Keys{}, err
	}
	k.keys = keys
	return keys, nil
}
