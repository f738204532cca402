package opencode

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Follow implements adapters.Follower. It subscribes to the event stream
// (GET /global/event, every directory's events; 1.18.33) of each server
// the last pass found, and wakes the tracker for the events that change
// what a pass decides: a session's status (busy, idle, an error), a
// permission or a question asked or answered. Servers come and go with
// the passes; a stream that breaks is opened again, later each time.
func (a *Adapter) Follow(ctx context.Context, wake func()) {
	subs := map[string]context.CancelFunc{}
	var wg sync.WaitGroup
	defer func() {
		for _, cancel := range subs {
			cancel()
		}
		wg.Wait()
	}()
	for {
		want := map[string]bool{}
		for _, s := range a.lastServers() {
			want[s.URL] = true
		}
		for u, cancel := range subs {
			if !want[u] {
				cancel()
				delete(subs, u)
			}
		}
		for u := range want {
			if subs[u] != nil {
				continue
			}
			sctx, cancel := context.WithCancel(ctx)
			subs[u] = cancel
			wg.Add(1)
			go func() {
				defer wg.Done()
				a.subscribe(sctx, u, wake)
			}()
		}
		select {
		case <-ctx.Done():
			return
		case <-a.serversChanged:
		}
	}
}

// Backoff of a broken stream: it doubles from the first to the last, and
// starts over after a stream that lasted streamHealthy.
const (
	streamRetryFirst = time.Second
	streamRetryMax   = 30 * time.Second
	streamHealthy    = time.Minute
)

// subscribe follows one server's stream until ctx ends.
func (a *Adapter) subscribe(ctx context.Context, base string, wake func()) {
	retry := streamRetryFirst
	for {
		opened := time.Now()
		err := a.stream(ctx, base, wake)
		if ctx.Err() != nil {
			return
		}
		if time.Since(opened) > streamHealthy {
			retry = streamRetryFirst
		}
		a.logOnce("event stream "+base+" "+errText(err), "OpenCode server event stream ended; opened again later",
			zap.String("server", base), zap.Duration("retry_in", retry), zap.Error(err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry):
		}
		retry = min(2*retry, streamRetryMax)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// maxEventLine bounds the event lines decoded: the events that wake are
// small; a longer line (a message part's text) is skipped unread.
const maxEventLine = 64 << 10

// stream reads the server's event stream until it ends, calling wake for
// each event that matters.
func (a *Adapter) stream(ctx context.Context, base string, wake func()) error {
	if _, err := loopbackAddr(base); err != nil {
		return fmt.Errorf("refused: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/global/event", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	a.authorize(req)
	// The pass's client has a timeout for whole answers; a stream has none.
	c := &http.Client{Transport: a.cfg.HTTPClient.Transport}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /global/event: %s", resp.Status)
	}
	a.log.Debug("following OpenCode server events", zap.String("server", base))
	r := bufio.NewReaderSize(resp.Body, 4096)
	var line []byte
	tooLong := false
	for {
		chunk, isPrefix, err := r.ReadLine()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return errors.New("the server closed the stream")
			}
			return err
		}
		if tooLong = tooLong || len(line)+len(chunk) > maxEventLine; !tooLong {
			line = append(line, chunk...)
		}
		if isPrefix {
			continue
		}
		if !tooLong {
			if typ := wakingEvent(line); typ != "" {
				a.log.Debug("OpenCode server event", zap.String("server", base), zap.String("event", typ))
				wake()
			}
		}
		line, tooLong = line[:0], false
	}
}

// wakingTypes are the event types (1.18.33's Event schema) after which a
// pass may decide otherwise.
var wakingTypes = map[string]bool{
	"session.status": true, "session.idle": true, "session.error": true,
	"permission.asked": true, "permission.replied": true,
	"permission.v2.asked": true, "permission.v2.replied": true,
	"question.asked": true, "question.replied": true, "question.rejected": true,
	"question.v2.asked": true, "question.v2.replied": true, "question.v2.rejected": true,
}

// wakingEvent is the type of the SSE line's event when it is one of
// wakingTypes, else "". Lines that name none of them are not decoded:
// text deltas stream by the hundred per turn.
func wakingEvent(line []byte) string {
	data, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok || !(bytes.Contains(data, []byte(`"session.`)) || bytes.Contains(data, []byte(`"permission.`)) || bytes.Contains(data, []byte(`"question.`))) {
		return ""
	}
	var ev struct {
		Payload struct {
			Type string `json:"type"`
		} `json:"payload"`
	}
	if json.Unmarshal(data, &ev) != nil || !wakingTypes[ev.Payload.Type] {
		return ""
	}
	return ev.Payload.Type
}
