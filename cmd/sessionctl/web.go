package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/sessiond/sessiond/web"
)

// defaultWebListen is where sessionctl web listens unless told: this
// machine only.
const defaultWebListen = "127.0.0.1:7380"

func newWeb(a *app) *cobra.Command {
	var listen string
	var allowHosts []string
	var network bool
	cmd := &cobra.Command{
		Use:   "web",
		Short: "Serve a live dashboard of every session of every host, for a browser",
		Long: `web serves a dashboard of the sessions of every host (--host, or
SESSIOND_HOST, else the local sessiond) on ` + defaultWebListen + `, live from their
event streams, in top's order; a session's page shows its fields and recent
events and sends prompts, stops, aborts, repairs and reaps through the same
API as sessionctl, each shown and confirmed first.

It prints the URL once, with a fresh random token: opening it sets an
HttpOnly, SameSite=Strict cookie, and every request needs it. Requests must
name the listen address or localhost in their Host header (--allow-host adds
a name, such as the one a tunnel serves); actions are POSTs with the token in
a header and this page's Origin. Listening on anything but a loopback
address needs --allow-network. To reach it from a phone, use your own
tunnel (ssh -L, tailscale serve): see docs/web.md.`,
		Example: `  sessionctl web
  sessionctl web --host unix:///run/a.sock --host ssh://build-box
  sessionctl web --allow-host laptop.tailnet-1234.ts.net`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runWeb(cmd.Context(), a, listen, allowHosts, network)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", defaultWebListen, "the address to listen on (host:port; port 0 picks a free one)")
	cmd.Flags().StringArrayVar(&allowHosts, "allow-host", nil, "also answer requests for this host name (a tunnel's), repeatable")
	cmd.Flags().BoolVar(&network, "allow-network", false, "allow a --listen address that is not loopback: the dashboard is then reachable from the network")
	return cmd
}

func runWeb(ctx context.Context, a *app, listen string, allowHosts []string, network bool) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return usageError{fmt.Errorf("--listen %q: %w", listen, err)}
	}
	loopback := host == "localhost"
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		loopback = true
	}
	if !loopback && !network {
		return usageError{fmt.Errorf("--listen %s is not a loopback address: anyone on the network could reach the dashboard; add --allow-network if that is meant (a tunnel to 127.0.0.1 is safer: see docs/web.md)", listen)}
	}
	ec := zap.NewProductionEncoderConfig()
	ec.EncodeTime = zapcore.ISO8601TimeEncoder
	ec.EncodeLevel = zapcore.CapitalLevelEncoder
	log := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(ec), zapcore.Lock(zapcore.AddSync(a.stderr)), zap.InfoLevel)).Named("web")
	defer log.Sync()

	var hosts []web.Host
	for _, hc := range a.hostClients() {
		hosts = append(hosts, web.Host{Name: hc.name, Client: hc.c})
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", listen, err)
	}
	addr := ln.Addr().String()
	srv, err := web.New(web.Options{Hosts: hosts, Listen: addr, AllowHosts: allowHosts, Logger: log})
	if err != nil {
		ln.Close()
		return err
	}
	if !loopback {
		log.Warn("listening on a non-loopback address: the dashboard is reachable from the network, guarded by its token only",
			zap.String("listen", addr))
	}
	log.Info("serving", zap.String("listen", addr), zap.Int("hosts", len(hosts)), zap.Strings("allow_host", allowHosts))
	fmt.Fprintf(a.stdout, "sessionctl web: open %s\n", srv.URL(addr))

	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Requests live in rctx: the pages' streams end with the server.
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, ErrorLog: zap.NewStdLog(log.Named("http")),
		BaseContext: func(net.Listener) context.Context { return rctx }}
	go srv.Run(rctx)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err = <-errc:
	case <-ctx.Done():
		sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer scancel()
		cancel()
		hs.Shutdown(sctx)
		err = <-errc
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
