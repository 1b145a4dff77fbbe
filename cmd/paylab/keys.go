package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/internal/platform/apikey"
	"github.com/paylab/paylab/internal/platform/envconfig"
)

// keysConfig is where the keys are stored: the orders and the ledger
// databases, whose APIs accept them.
type keysConfig struct {
	OrdersURL string `env:"ORDERS_DATABASE_URL" envDefault:"postgres://orders:orders@127.0.0.1:55432/orders?sslmode=disable"`
	LedgerURL string `env:"LEDGER_DATABASE_URL" envDefault:"postgres://ledger:ledger@127.0.0.1:55432/ledger?sslmode=disable"`
}

// runKeys: paylab keys create --merchant M [--name N] | list [--merchant M] [--json] | revoke ID
func runKeys(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errUsage
	}
	cfg, err := envconfig.Load(nil, keysConfig{}, nil)
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("keys "+args[0], flag.ContinueOnError)
	fs.SetOutput(out)
	merchant := fs.String("merchant", "", "the merchant the key acts for (create), or whose keys to list")
	name := fs.String("name", "", "a label for the key (create)")
	asJSON := fs.Bool("json", false, "print the keys as JSON (list)")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	var run func(*apikey.Store) error
	switch {
	case args[0] == "create" && fs.NArg() == 0 && *merchant != "":
		run = func(s *apikey.Store) error { return createKey(ctx, s, *merchant, *name, out) }
	case args[0] == "list" && fs.NArg() == 0:
		run = func(s *apikey.Store) error { return listKeys(ctx, s, *merchant, *asJSON, out) }
	case args[0] == "revoke" && fs.NArg() == 1:
		run = func(s *apikey.Store) error { return revokeKey(ctx, s, fs.Arg(0), out) }
	default:
		return errUsage
	}
	return withKeyStore(ctx, cfg.OrdersURL, cfg.LedgerURL, run)
}

// withKeyStore calls fn with the key store of the orders and ledger
// databases at the two URLs.
func withKeyStore(ctx context.Context, ordersURL, ledgerURL string, fn func(*apikey.Store) error) error {
	orders, err := pgx.Connect(ctx, ordersURL)
	if err != nil {
		return fmt.Errorf("connecting to the orders database: %w", err)
	}
	defer orders.Close(context.WithoutCancel(ctx))
	ledger, err := pgx.Connect(ctx, ledgerURL)
	if err != nil {
		return fmt.Errorf("connecting to the ledger database: %w", err)
	}
	defer ledger.Close(context.WithoutCancel(ctx))
	return fn(apikey.NewStore(orders, ledger))
}

func createKey(ctx context.Context, s *apikey.Store, merchant, name string, out io.Writer) error {
	key, info, err := s.Create(ctx, merchant, name)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, key)
	fmt.Fprintf(out, "key %s of merchant %s: shown only now, paylab stores its hash; send it as Authorization: Bearer <key>\n",
		info.ID, info.MerchantID)
	return nil
}

func listKeys(ctx context.Context, s *apikey.Store, merchant string, asJSON bool, out io.Writer) error {
	keys, err := s.List(ctx, merchant)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(keys)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tMERCHANT\tNAME\tCREATED\tREVOKED")
	for _, k := range keys {
		revoked := "-"
		if k.RevokedAt != nil {
			revoked = k.RevokedAt.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.ID, k.MerchantID, k.Name, k.CreatedAt.Format(time.RFC3339), revoked)
	}
	return tw.Flush()
}

func revokeKey(ctx context.Context, s *apikey.Store, id string, out io.Writer) error {
	revoked, err := s.Revoke(ctx, id)
	if err != nil {
		return err
	}
	if !revoked {
		return fmt.Errorf("no active key has id %q", id)
	}
	fmt.Fprintf(out, "key %s revoked (the APIs refuse it within API_KEY_CACHE_TTL)\n", id)
	return nil
}

// demoKeyLine starts the line of init's output that holds the demo key, so
// that `export $(… | grep ^PAYLAB_API_KEY=)` sets it.
const demoKeyLine = "PAYLAB_API_KEY="

// noDemoKeyFile as DEMO_API_KEY_FILE keeps the demo key in no file.
const noDemoKeyFile = "-"

// ensureDemoKey prints the demo merchant's key: the one in file when it is
// still an active key of that merchant, else a new one, which it writes to
// file (unless file is "-") for the next run and for the README's curl.
func ensureDemoKey(ctx context.Context, s *apikey.Store, merchant, file string, out io.Writer) error {
	if file == noDemoKeyFile {
		file = ""
	}
	if file != "" {
		if b, err := os.ReadFile(file); err == nil {
			key := strings.TrimSpace(string(b))
			m, ok, err := s.Check(ctx, key)
			if err != nil {
				return err
			}
			if ok && m == merchant {
				fmt.Fprintf(out, "demo API key of merchant %s (in %s):\n%s%s\n", merchant, file, demoKeyLine, key)
				return nil
			}
		}
	}
	key, info, err := s.Create(ctx, merchant, "demo")
	if err != nil {
		return fmt.Errorf("creating the demo API key: %w", err)
	}
	where := "kept in no file: DEMO_API_KEY_FILE is -"
	if file != "" {
		// The key is printed whether or not the file can be written (a
		// read-only container, say): the file only spares the next run a
		// new key.
		where = "written to " + file
		err := os.MkdirAll(filepath.Dir(file), 0o700)
		if err == nil {
			err = os.WriteFile(file, []byte(key+"\n"), 0o600)
		}
		if err != nil {
			where = fmt.Sprintf("not written to DEMO_API_KEY_FILE: %v", err)
		}
	}
	fmt.Fprintf(out, "demo API key %s of merchant %s created (%s):\n%s%s\n", info.ID, merchant, where, demoKeyLine, key)
	return nil
}
