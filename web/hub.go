package web

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/api"
)

// key is a session on its host: ids are unique on one host only.
type key struct{ host, id string }

// msg is one message of the page's event stream.
type msg struct {
	// T is the kind: "snap" (every session and host, first), "list" (a
	// host's whole list, after it came back), "s" (one session changed),
	// "gone" (one session is no more), "host" (a host's stream broke,
	// Error, or is back, no Error).
	T        string        `json:"t"`
	Host     string        `json:"host,omitempty"`
	ID       string        `json:"id,omitempty"`
	Error    string        `json:"error,omitempty"`
	Session  *api.Session  `json:"s,omitempty"`
	Sessions []api.Session `json:"sessions,omitempty"`
	Hosts    []hostState   `json:"hosts,omitempty"`
	Event    *api.Event    `json:"ev,omitempty"`
}

// hostState is a host as the page names it, with why it is down.
type hostState struct {
	Name  string `json:"name"`
	Error string `json:"error,omitempty"`
}

// hub keeps every host's sessions, fed by their event streams, and hands
// each change to the pages that listen.
type hub struct {
	hosts []Host
	retry time.Duration
	log   *zap.Logger

	mu       sync.Mutex
	sessions map[key]api.Session
	down     map[string]string // by host: why its stream is down
	listed   map[string]bool   // hosts whose list was read once
	subs     map[chan []byte]struct{}
}

func newHub(hosts []Host, retry time.Duration, log *zap.Logger) *hub {
	if retry <= 0 {
		retry = time.Second
	}
	h := &hub{hosts: hosts, retry: retry, log: log, sessions: map[key]api.Session{}, down: map[string]string{},
		listed: map[string]bool{}, subs: map[chan []byte]struct{}{}}
	for _, host := range hosts {
		h.down[host.Name] = "connecting"
	}
	return h
}

func (h *hub) run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, host := range h.hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.follow(ctx, host)
		}()
	}
	wg.Wait()
}

// subscribe returns a channel of the stream's messages, the snapshot
// first. A listener too slow to keep up is dropped (its channel closed):
// the page connects again and starts from a new snapshot.
func (h *hub) subscribe() (chan []byte, func()) {
	ch := make(chan []byte, 1024)
	h.mu.Lock()
	ch <- h.snapshotLocked()
	h.subs[ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		if _, ok := h.subs[ch]; ok {
			delete(h.subs, ch)
			close(ch)
		}
		h.mu.Unlock()
	}
}

// list is every session now, and whether every host's list was read
// at least once.
func (h *hub) list() ([]api.Session, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]api.Session, 0, len(h.sessions))
	for _, s := range h.sessions {
		out = append(out, s)
	}
	return out, len(h.listed) == len(h.hosts)
}

func (h *hub) snapshot() []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.snapshotLocked()
}

func (h *hub) snapshotLocked() []byte {
	m := msg{T: "snap", Sessions: make([]api.Session, 0, len(h.sessions))}
	for _, s := range h.sessions {
		m.Sessions = append(m.Sessions, s)
	}
	for _, host := range h.hosts {
		m.Hosts = append(m.Hosts, hostState{host.Name, h.down[host.Name]})
	}
	b, _ := json.Marshal(m)
	return b
}

// publishLocked hands m to every listener.
func (h *hub) publishLocked(m msg) {
	b, err := json.Marshal(m)
	if err != nil {
		h.log.Warn("encode a message for the page", zap.Error(err))
		return
	}
	for ch := range h.subs {
		select {
		case ch <- b:
		default:
			delete(h.subs, ch)
			close(ch)
		}
	}
}

// follow keeps one host's sessions: its list, then each event's session
// fetched again. When the stream breaks the page is told, and once the
// host answers again its list is read anew, from a position taken first,
// so no change falls between the list and the stream.
func (h *hub) follow(ctx context.Context, host Host) {
	c := host.Client
	for {
		err := h.followOnce(ctx, host.Name, c)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("the event stream ended")
		}
		h.mu.Lock()
		if h.down[host.Name] != err.Error() {
			h.log.Warn("a host's event stream broke; retrying", zap.String("host", host.Name), zap.Error(err))
			h.down[host.Name] = err.Error()
			h.publishLocked(msg{T: "host", Host: host.Name, Error: err.Error()})
		}
		h.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(h.retry):
		}
	}
}

func (h *hub) followOnce(ctx context.Context, name string, c *api.Client) error {
	health, err := c.Health(ctx)
	if err != nil {
		return err
	}
	ss, err := c.Sessions(ctx, api.ListOptions{All: true})
	if err != nil {
		return err
	}
	h.mu.Lock()
	for k := range h.sessions {
		if k.host == name {
			delete(h.sessions, k)
		}
	}
	for i := range ss {
		ss[i].Host = name
		h.sessions[key{name, ss[i].ID}] = ss[i]
	}
	delete(h.down, name)
	h.listed[name] = true
	h.publishLocked(msg{T: "list", Host: name, Sessions: ss})
	h.mu.Unlock()
	h.log.Info("following a host", zap.String("host", name), zap.Int("sessions", len(ss)), zap.Uint64("since", health.LastEventSeq))

	// Events name the session that changed; a fetcher reads each named
	// session once per burst, so a busy host's stream never waits on it.
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var fmu sync.Mutex
	pending := map[string]*api.Event{}
	var order []string
	wake := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-fctx.Done():
				return
			case <-wake:
			}
			for {
				fmu.Lock()
				if len(order) == 0 {
					fmu.Unlock()
					break
				}
				id := order[0]
				order = order[1:]
				ev := pending[id]
				delete(pending, id)
				fmu.Unlock()
				h.refresh(fctx, name, c, id, ev)
			}
		}
	}()
	err = c.Events(ctx, api.EventsOptions{Since: health.LastEventSeq, Follow: true}, func(ev api.Event) error {
		fmu.Lock()
		if _, ok := pending[ev.SessionID]; !ok {
			order = append(order, ev.SessionID)
		}
		e := ev
		pending[ev.SessionID] = &e
		fmu.Unlock()
		select {
		case wake <- struct{}{}:
		default:
		}
		return nil
	})
	cancel()
	<-done
	return err
}

// refresh reads one session again after an event named it, and tells
// the pages, with the event (for their notifications).
func (h *hub) refresh(ctx context.Context, host string, c *api.Client, id string, ev *api.Event) {
	s, err := c.Session(ctx, id)
	h.mu.Lock()
	defer h.mu.Unlock()
	k := key{host, id}
	switch {
	case err == nil:
		s.Host = host
		h.sessions[k] = *s
		h.publishLocked(msg{T: "s", Session: s, Event: ev})
	case api.IsNotFound(err):
		delete(h.sessions, k)
		h.publishLocked(msg{T: "gone", Host: host, ID: id})
	default:
		if ctx.Err() == nil {
			h.log.Warn("read a session after its event", zap.String("host", host), zap.String("session", id), zap.Error(err))
		}
	}
}
