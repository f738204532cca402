package web

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/session"
)

// BenchmarkFirstPage is the server's part of the first page of 2,000
// sessions: all ordered, the first rows written into the page.
func BenchmarkFirstPage(b *testing.B) {
	s, err := New(Options{Hosts: []Host{{Name: "", Client: api.NewClient("/nonexistent")}}, Listen: "127.0.0.1:1", Token: testToken})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	for i := range 2000 {
		at := now.Add(-time.Duration(i) * time.Minute)
		st := session.StatusStopped
		if i%10 == 0 {
			st = session.StatusInterrupted
		}
		s.hub.sessions[key{"", fmt.Sprint(i)}] = api.Session{ID: fmt.Sprintf("%012x", i), Agent: "claude", Status: st, StoppedAt: &at,
			UpdatedAt: at, Cwd: fmt.Sprintf("/home/u/src/project-%03d", i%150), Title: "run the tests and fix what fails",
			Problems: []session.Problem{{Kind: session.ProblemOrphanedToolCall}}}
	}
	s.hub.listed[""] = true
	b.ResetTimer()
	var n int
	for b.Loop() {
		r := httptest.NewRequest("GET", "/?all=1", nil)
		r.Host = "127.0.0.1:1"
		r.AddCookie(&http.Cookie{Name: CookieName, Value: testToken})
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		n = w.Body.Len()
	}
	b.ReportMetric(float64(n), "bytes/page")
}
