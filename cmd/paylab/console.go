package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/compose-spec/compose-go/v2/dotenv"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/internal/lab/chaosrun"
	"github.com/paylab/paylab/internal/lab/console"
	"github.com/paylab/paylab/internal/platform/admin"
	"github.com/paylab/paylab/internal/platform/envconfig"
	"github.com/paylab/paylab/internal/platform/process"
)

// runConsole: paylab console [--target local|compose] [--addr A] [--allowed-hosts H,...] [--mode M] [--relays N]
// [--relay-mode poll|wal] [--bin DIR] [--mailpit PATH] [--logs DIR] [--env-file .env]
func runConsole(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("console", flag.ContinueOnError)
	fs.SetOutput(out)
	target := fs.String("target", "local", "local: start the services on private servers and drive them;\n"+
		"compose: a running docker compose deployment, over its admin APIs (the CHAOS_* settings of paylab chaos, no token;\n"+
		"its actions need the deployment's CHAOS_ENABLED=true and the token typed into the page)")
	addr := fs.String("addr", "", "where to serve the page (default HTTP_ADDR, or 127.0.0.1:8090)")
	allowedHosts := fs.String("allowed-hosts", "", "comma-separated host names (name, or name:port) a browser may reach the page by besides\n"+
		"localhost, 127.0.0.1 and [::1] on its port; every other Host is refused (default CONSOLE_ALLOWED_HOSTS)")
	mode := fs.String("mode", console.ModeOutbox, "local: the orders API's first OUTBOX_MODE (outbox, naive or naive-publish-first)")
	relays := fs.Int("relays", 2, "local: how many relays")
	relayMode := fs.String("relay-mode", console.RelayPoll, "local: the relays' RELAY_MODE: poll (claim with leases) or wal (stream a replication slot)")
	envFile := fs.String("env-file", ".env", "compose: the .env that docker compose read (the environment wins over it)")
	exe, _ := os.Executable()
	bin := fs.String("bin", filepath.Dir(exe), "local: folder with the orders, ledger and notifications binaries")
	mailpit := fs.String("mailpit", defaultMailpit(), "local: Mailpit binary (make mailpit builds it)")
	logs := fs.String("logs", "", "local: folder for the processes' logs (default: a temporary folder)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		return errUsage
	}
	listen, err := envconfig.Load(nil, console.Listen{}, nil)
	if err != nil {
		return err
	}
	if *addr != "" {
		listen.HTTPAddr = *addr
	}
	if isSet(fs, "allowed-hosts") {
		listen.AllowedHosts = strings.Split(*allowedHosts, ",")
	}
	if _, err := console.AllowHosts(listen.HTTPAddr, listen.AllowedHosts...); err != nil {
		return err // before anything starts
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	var d console.Deployment
	var token string
	switch *target {
	case "local":
		if *logs == "" {
			if *logs, err = os.MkdirTemp("", "paylab-console-"); err != nil {
				return err
			}
		}
		if *relayMode != console.RelayPoll && *relayMode != console.RelayWAL {
			return fmt.Errorf("console: --relay-mode %q is not %s or %s", *relayMode, console.RelayPoll, console.RelayWAL)
		}
		env := &chaosrun.Env{Bin: *bin, Mailpit: *mailpit, LogDir: *logs, RelayMode: *relayMode}
		fmt.Fprintf(out, "console: starting private PostgreSQL, Kafka and Mailpit, then the services (logs in %s)\n", *logs)
		if err := env.Start(ctx); err != nil {
			env.Stop()
			return fmt.Errorf("console: %w", err)
		}
		defer env.Stop()
		if token = os.Getenv("CHAOS_TOKEN"); token == "" {
			token = randomToken()
		}
		l, err := console.StartLocal(ctx, console.LocalConfig{Bin: *bin, LogDir: *logs, Servers: env.Servers(),
			Token: token, Mode: *mode, Relays: *relays, RelayMode: *relayMode})
		if err != nil {
			return err
		}
		defer l.Stop()
		d = l
	case "compose":
		if isSet(fs, "mode") || isSet(fs, "relays") || isSet(fs, "relay-mode") {
			return errors.New("console: --mode, --relays and --relay-mode are for --target local; a compose deployment runs what its .env says")
		}
		environ, err := readEnviron(*envFile, isSet(fs, "env-file"))
		if err != nil {
			return fmt.Errorf("console: %w", err)
		}
		cfg, err := console.LoadComposeConfig(environ)
		if err != nil {
			return err
		}
		d = console.NewCompose(cfg)
	default:
		return fmt.Errorf("console: --target %q is not local or compose", *target)
	}

	srv, err := console.New(ctx, d, log)
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	var g process.Group
	ln, err := net.Listen("tcp", listen.HTTPAddr)
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	hosts, err := console.AllowHosts(ln.Addr().String(), listen.AllowedHosts...)
	if err != nil {
		ln.Close()
		return err
	}
	g.Serve("the console", &http.Server{Handler: srv.Handler(hosts), ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}, ln)
	if listen.AdminAddr != "" {
		aln, err := net.Listen("tcp", listen.AdminAddr)
		if err != nil {
			return fmt.Errorf("console: the admin listener: %w", err)
		}
		g.Serve("the admin listener", admin.Server(listen.AdminAddr, admin.Handler(prometheus.NewRegistry(), nil)), aln)
	}
	g.Go(srv.Run)
	fmt.Fprintf(out, "console: http://%s/ (%s deployment, OUTBOX_MODE=%s); Ctrl-C stops it\n", ln.Addr(), d.Target(), d.Settings().Mode)
	fmt.Fprintf(out, "console: answers the host names %s\n", strings.Join(hosts.List(), ", "))
	if token != "" {
		fmt.Fprintf(out, "console: the chaos token of these processes is %s (type it into the page to act)\n", token)
	}
	return g.Run(ctx, log)
}

// randomToken is a fresh chaos token for the processes the console starts.
func randomToken() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// readEnviron is the environment over envFile, as docker compose
// interpolates them; a missing envFile is an error only when required.
func readEnviron(envFile string, required bool) (map[string]string, error) {
	environ := map[string]string{}
	if _, err := os.Stat(envFile); err == nil || required {
		if environ, err = dotenv.ReadWithLookup(os.LookupEnv, envFile); err != nil {
			return nil, fmt.Errorf("reading %s: %w", envFile, err)
		}
	}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		environ[k] = v
	}
	return environ, nil
}
