package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/sessiond/sessiond/api"
)

// serveList answers GET /v1/sessions on a Unix socket with body.
func serveList(t *testing.T, body []byte) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/sessions" || r.URL.Query().Get("all") != "true" {
			http.Error(w, `{"error":"unexpected `+r.URL.String()+`"}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sock
}

// ls --json to a pipe prints the daemon's bytes unchanged (a list of
// thousands is not decoded and encoded again), and they are the API's
// SessionList.
func TestLsJSONPassesTheDaemonsBytes(t *testing.T) {
	list := api.SessionList{Sessions: []api.Session{{ID: "3ab8568e0000", Agent: "claude", Status: "running", PID: 42}, {ID: "77aa", Agent: "opencode", Status: "stopped"}}}
	body, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	body = append(body, '\n') // as the daemon's encoder ends it
	sock := serveList(t, body)
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"--socket", sock, "ls", "--all", "--json"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !bytes.Equal(stdout.Bytes(), body) {
		t.Fatalf("printed\n%s\nwant the daemon's bytes\n%s", stdout.Bytes(), body)
	}
	var got api.SessionList
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil || len(got.Sessions) != 2 || got.Sessions[0].PID != 42 {
		t.Fatalf("decoded %+v, %v", got, err)
	}
}

// An error answer is still an error, with the daemon's message.
func TestLsJSONError(t *testing.T) {
	sock := serveList(t, nil)
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"--socket", sock, "ls", "--json"}, &stdout, &stderr); code == exitOK {
		t.Fatalf("exit 0 on a 400: %s", stdout.String())
	}
	if !bytes.Contains(stderr.Bytes(), []byte("unexpected")) {
		t.Fatalf("stderr %q does not carry the daemon's message", stderr.String())
	}
}
