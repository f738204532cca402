package opencodetest

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestInterruptedShape(t *testing.T) {
	d := MustCreate(t, filepath.Join(t.TempDir(), "opencode.db"))
	at := time.Now()
	sh, err := d.InterruptedMidTool("/work/proj", at)
	if err != nil {
		t.Fatal(err)
	}
	var mode string
	if err := d.SQL().QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal mode %q, %v; want wal", mode, err)
	}
	var data string
	if err := d.SQL().QueryRow("SELECT data FROM message WHERE id = ?", sh.AssistantMessageID).Scan(&data); err != nil {
		t.Fatal(err)
	}
	var m struct {
		Role string         `json:"role"`
		Time map[string]any `json:"time"`
	}
	if err := json.Unmarshal([]byte(data), &m); err != nil {
		t.Fatal(err)
	}
	if m.Role != "assistant" || m.Time["created"] == nil || m.Time["completed"] != nil {
		t.Fatalf("assistant message %s: want time with only created", data)
	}
	if err := d.SQL().QueryRow("SELECT data FROM part WHERE id = ?", sh.ToolPartID).Scan(&data); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(data, `"status":"running"`) || !strings.Contains(data, `"tool":"bash"`) || strings.Contains(data, `"end"`) {
		t.Fatalf("tool part %s: want a running bash part without end", data)
	}
	if strings.Contains(data, `"id"`) || strings.Contains(data, `"sessionID"`) {
		t.Fatalf("data column must not carry ids: %s", data)
	}
}

func TestScenarios(t *testing.T) {
	d := MustCreate(t, filepath.Join(t.TempDir(), "opencode.db"))
	at := time.Now()
	if _, err := d.Finished("/a", at); err != nil {
		t.Fatal(err)
	}
	ch, err := d.Child("/a", at, "running")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.WaitingOnQuestion("/a", at); err != nil {
		t.Fatal(err)
	}
	var parent string
	if err := d.SQL().QueryRow("SELECT parent_id FROM session WHERE id = ?", ch.ChildID).Scan(&parent); err != nil || parent != ch.SessionID {
		t.Fatalf("child parent_id %q, %v", parent, err)
	}
	var n int
	d.SQL().QueryRow("SELECT count(*) FROM session").Scan(&n)
	if n != 4 {
		t.Fatalf("%d sessions, want 4", n)
	}
}

func TestLegacy(t *testing.T) {
	dir := t.TempDir()
	l := NewLegacy(dir)
	sh, err := l.InterruptedMidTool("/p", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "storage", "session", "*", sh.SessionID+".json"))
	if len(matches) != 1 {
		t.Fatalf("session file missing: %v", matches)
	}
	b, err := os.ReadFile(filepath.Join(dir, "storage", "part", sh.AssistantMessageID, sh.ToolPartID+".json"))
	if err != nil || !strings.Contains(string(b), `"running"`) {
		t.Fatalf("part file: %s %v", b, err)
	}
}

func TestFakeServer(t *testing.T) {
	f := NewFakeServer()
	defer f.Close()
	f.Password = "pw"
	f.SetStatus("/a", "ses_1", Status{Type: "busy"})
	get := func(path, pw string) (int, string) {
		req, _ := http.NewRequest("GET", f.URL+path, nil)
		if pw != "" {
			req.SetBasicAuth("opencode", pw)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		n, _ := resp.Body.Read(buf)
		b.Write(buf[:n])
		return resp.StatusCode, b.String()
	}
	if code, _ := get("/global/health", ""); code != 401 {
		t.Fatalf("no auth: %d", code)
	}
	if code, body := get("/session/status?directory=/a", "pw"); code != 200 || !strings.Contains(body, "ses_1") {
		t.Fatalf("status: %d %s", code, body)
	}
	if code, body := get("/session/ses_x", "pw"); code != 404 || !strings.Contains(body, "NotFoundError") {
		t.Fatalf("missing session: %d %s", code, body)
	}
	f.Lock()
	f.Fail["/session/status"] = 500
	f.Unlock()
	if code, _ := get("/session/status", "pw"); code != 500 {
		t.Fatalf("injected failure: %d", code)
	}
}
