package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/view"
)

// The view's modes: the list, one session's details, a plan waiting for
// y, and a line being typed (a filter, a prompt).
type topMode int

const (
	modeList topMode = iota
	modeShow
	modeConfirm
	modeFilter
	modeSend
)

// Messages from commands and from the event stream.
type (
	listMsg struct {
		host string
		ss   []api.Session
		err  error
	}
	sessionMsg struct {
		key sessKey
		s   *api.Session
		err error
	}
	eventMsg struct {
		host string
		api.Event
	}
	streamMsg struct { // a host's stream broke (nil: it is back)
		host string
		err  error
	}
	tickMsg time.Time
	planMsg struct {
		p   *plan
		seq int // the request it answers (topModel.planSeq)
	}
	resultMsg struct {
		text string
		err  error
	}
	attachedMsg struct{ err error }
)

// sessKey is a session on its host ("" for the local socket): ids are
// unique on one host only.
type sessKey struct{ host, id string }

func keyOf(s *api.Session) sessKey { return sessKey{s.Host, s.ID} }

// plan is an action shown before it is carried out.
type plan struct {
	action string // repair, reap, stop, abort
	host   string
	id     string
	lines  []string
	err    error
}

type topModel struct {
	ctx context.Context
	a   *app
	// clients are the view's hosts (one: the local socket, unless
	// --host named others), one connection pool each for every fetch.
	clients map[string]*api.Client
	hosts   []string // in the order named
	opts    topOptions

	sessions map[sessKey]api.Session
	rows     []api.Session
	selected sessKey // kept across reorders
	cursor   int
	offset   int
	width    int
	height   int

	mode  topMode
	input string // the filter or prompt being typed
	// sendTo is the session a prompt being typed goes to: chosen when
	// s was pressed, whatever the rows do meanwhile.
	sendTo sessKey
	plan   *plan
	// planSeq numbers plan requests: a plan is shown only if it answers
	// the latest one and the list is still what has the keys.
	planSeq int
	detail  string
	message string
	isError bool
	stream  map[string]string // by host: why its event stream is down
	loaded  bool
	// fetching holds sessions whose fetch is under way, so a burst of
	// events for one session fetches it once.
	fetching map[sessKey]bool
	refetch  map[sessKey]bool
	// listing holds the hosts whose whole list is on its way; touched
	// the sessions events named meanwhile, fetched again once it lands
	// (the list may have been read before their change).
	listing map[string]bool
	touched map[sessKey]bool
}

// newTopModel is the view of the sessions of hcs.
func newTopModel(ctx context.Context, a *app, o topOptions, hcs []hostClient) *topModel {
	m := &topModel{ctx: ctx, a: a, opts: o, clients: map[string]*api.Client{}, sessions: map[sessKey]api.Session{},
		fetching: map[sessKey]bool{}, refetch: map[sessKey]bool{}, listing: map[string]bool{}, touched: map[sessKey]bool{},
		stream: map[string]string{}, width: 120, height: 30}
	for _, hc := range hcs {
		m.clients[hc.name] = hc.c
		m.hosts = append(m.hosts, hc.name)
	}
	return m
}

var (
	styleHeader   = lipgloss.NewStyle().Bold(true)
	styleSelected = lipgloss.NewStyle().Reverse(true)
	styleWaiting  = lipgloss.NewStyle().Foreground(lipgloss.Color("3")).Bold(true)
	styleInterr   = lipgloss.NewStyle().Foreground(lipgloss.Color("1")).Bold(true)
	styleBusy     = lipgloss.NewStyle().Foreground(lipgloss.Color("2"))
	styleStopped  = lipgloss.NewStyle().Faint(true)
	styleError    = lipgloss.NewStyle().Foreground(lipgloss.Color("1"))
)

// runTop runs the full-screen view until the user quits. The event
// stream feeds it: each event refetches the one session it names.
func runTop(ctx context.Context, a *app, o topOptions) error {
	hcs := a.hostClients()
	m := newTopModel(ctx, a, o, hcs)
	// Each stream starts from its log's end as of now; the lists are
	// read after that, so no change falls between the two. A host that
	// does not answer is shown as such; all failing, top does not start.
	answers := askHosts(ctx, hcs, func(ctx context.Context, c *api.Client) (*api.Health, error) { return c.Health(ctx) })
	if err := reportFailures(a, answers); err != nil {
		return err
	}
	p := tea.NewProgram(m, tea.WithAltScreen(), tea.WithContext(ctx), tea.WithOutput(a.stdout))
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	for i, ans := range answers {
		var since uint64
		if ans.err == nil {
			since = ans.val.LastEventSeq
		}
		go follow(sctx, hcs[i].name, hcs[i].c, since, ans.err == nil, p)
	}
	_, err := p.Run()
	if errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		return nil
	}
	return err
}

// follow streams a host's events into the program until ctx ends. When
// the stream breaks it says so, and once it can go on it has the host's
// list read again, from a position taken first, so no change falls
// between the list and the stream. positioned is false for a host that
// did not answer at the start: its position is its log's end once it
// does (its list is read then), not its first event.
func follow(ctx context.Context, host string, c *api.Client, since uint64, positioned bool, p *tea.Program) {
	reload := !positioned
	for {
		var err error
		if !positioned {
			var h *api.Health
			if h, err = c.Health(ctx); err == nil {
				since, positioned = h.LastEventSeq, true
			}
		}
		if err == nil {
			if reload {
				p.Send(streamMsg{host, nil})
				reload = false
			}
			err = c.Events(ctx, api.EventsOptions{Since: since, Follow: true}, func(ev api.Event) error {
				since = ev.Seq
				p.Send(eventMsg{host, ev})
				return nil
			})
		}
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("the event stream ended")
		}
		p.Send(streamMsg{host, err})
		reload = true
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func (m *topModel) Init() tea.Cmd { return tea.Batch(m.load(), tick()) }

func tick() tea.Cmd {
	return tea.Tick(time.Second, func(t time.Time) tea.Msg { return tickMsg(t) })
}

// load reads every host's sessions.
func (m *topModel) load() tea.Cmd {
	cmds := make([]tea.Cmd, 0, len(m.hosts))
	for _, h := range m.hosts {
		cmds = append(cmds, m.loadHost(h))
	}
	return tea.Batch(cmds...)
}

// loadHost reads one host's sessions.
func (m *topModel) loadHost(host string) tea.Cmd {
	m.listing[host] = true
	c, ctx := m.clients[host], m.ctx
	return func() tea.Msg {
		ss, err := c.Sessions(ctx, api.ListOptions{All: true})
		return listMsg{host, ss, err}
	}
}

// applyList takes a whole list as the sessions shown. A session already
// shown in a newer form than the list's (fetched for an event while the
// list was read) keeps it; one the list lacks but an event named
// meanwhile (created since) is kept; the sessions named meanwhile are
// fetched once more, so none stays as the list saw it.
func (m *topModel) applyList(host string, ss []api.Session) tea.Cmd {
	next := make(map[sessKey]api.Session, len(m.sessions)+len(ss))
	for k, s := range m.sessions {
		if k.host != host {
			next[k] = s // other hosts' sessions stay as they are
		}
	}
	for _, s := range ss {
		s.Host = host
		k := keyOf(&s)
		if old, ok := m.sessions[k]; ok && old.UpdatedAt.After(s.UpdatedAt) {
			s = old
		}
		next[k] = s
	}
	var cmds []tea.Cmd
	for k := range m.touched {
		if k.host != host {
			continue
		}
		if old, ok := m.sessions[k]; ok {
			if _, listed := next[k]; !listed {
				next[k] = old
			}
		}
		delete(m.touched, k)
		cmds = append(cmds, m.fetch(k))
	}
	m.sessions = next
	delete(m.listing, host)
	return tea.Batch(cmds...)
}

// fetch reads one session, once at a time per session.
func (m *topModel) fetch(k sessKey) tea.Cmd {
	if m.fetching[k] {
		m.refetch[k] = true
		return nil
	}
	c := m.clients[k.host]
	if c == nil {
		return nil
	}
	m.fetching[k] = true
	ctx := m.ctx
	return func() tea.Msg {
		s, err := c.Session(ctx, k.id)
		return sessionMsg{k, s, err}
	}
}

func (m *topModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	// cmd is what the message calls for next; every message that may
	// change the sessions ends in layout.
	var cmd tea.Cmd
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case listMsg:
		if msg.err != nil {
			delete(m.listing, msg.host)
			m.say(fmt.Errorf("%s", hostErr(msg.host, msg.err)))
			break
		}
		m.loaded = true
		cmd = m.applyList(msg.host, msg.ss)
	case sessionMsg:
		k := msg.key
		delete(m.fetching, k)
		var se *api.StatusError
		switch {
		case msg.err == nil:
			s := *msg.s
			s.Host = k.host
			// A fetch that left before a newer list or fetch landed
			// does not take its place.
			if old, ok := m.sessions[k]; !ok || !old.UpdatedAt.After(s.UpdatedAt) {
				m.sessions[k] = s
			}
		case errors.As(msg.err, &se) && se.Body.Code == api.CodeNotFound:
			delete(m.sessions, k)
		default:
			m.say(fmt.Errorf("%s", hostErr(k.host, msg.err)))
		}
		if m.refetch[k] {
			delete(m.refetch, k)
			cmd = m.fetch(k)
		}
	case eventMsg:
		k := sessKey{msg.host, msg.SessionID}
		if m.listing[msg.host] {
			m.touched[k] = true
		}
		return m, m.fetch(k)
	case streamMsg:
		if msg.err != nil {
			m.stream[msg.host] = hostErr(msg.host, msg.err)
			break
		}
		delete(m.stream, msg.host)
		return m, m.loadHost(msg.host)
	case tickMsg:
		m.opts.now = time.Time(msg)
		m.layout()
		return m, tick()
	case planMsg:
		// A plan that comes late (another asked since, or the user is
		// typing) is dropped: keys typed meanwhile must not confirm it.
		if msg.seq != m.planSeq || m.mode != modeList {
			break
		}
		if msg.p.err != nil {
			m.say(msg.p.err)
			break
		}
		m.plan, m.mode = msg.p, modeConfirm
	case resultMsg:
		// The mode is left as it is: the user may be typing.
		if msg.err != nil {
			m.say(msg.err)
		} else {
			m.message, m.isError = msg.text, false
		}
	case attachedMsg:
		if msg.err != nil {
			m.say(msg.err)
		}
	case tea.KeyMsg:
		return m.key(msg)
	}
	m.layout()
	return m, cmd
}

func (m *topModel) say(err error) { m.message, m.isError = err.Error(), true }

// layout recomputes the rows and keeps the selection on its session.
func (m *topModel) layout() {
	all := make([]api.Session, 0, len(m.sessions))
	for _, s := range m.sessions {
		all = append(all, s)
	}
	if m.opts.now.IsZero() {
		m.opts.now = time.Now()
	}
	m.rows = topRows(all, m.opts)
	m.cursor = 0
	for i := range m.rows {
		if keyOf(&m.rows[i]) == m.selected {
			m.cursor = i
			break
		}
	}
	if len(m.rows) > 0 {
		m.selected = keyOf(&m.rows[m.cursor])
	}
	m.scroll()
}

// listHeight is how many rows fit: the screen less the title, the column
// heads and two lines at the foot.
func (m *topModel) listHeight() int { return max(1, m.height-4) }

func (m *topModel) scroll() {
	h := m.listHeight()
	if m.cursor < m.offset {
		m.offset = m.cursor
	}
	if m.cursor >= m.offset+h {
		m.offset = m.cursor - h + 1
	}
	m.offset = max(0, min(m.offset, len(m.rows)-h))
}

func (m *topModel) current() *api.Session {
	if m.cursor < len(m.rows) {
		return &m.rows[m.cursor]
	}
	return nil
}

func (m *topModel) move(d int) {
	if len(m.rows) == 0 {
		return
	}
	m.cursor = max(0, min(len(m.rows)-1, m.cursor+d))
	m.selected = keyOf(&m.rows[m.cursor])
	m.scroll()
}

func (m *topModel) key(k tea.KeyMsg) (tea.Model, tea.Cmd) {
	if k.Type == tea.KeyCtrlC {
		return m, tea.Quit
	}
	switch m.mode {
	case modeFilter, modeSend:
		return m.typing(k)
	case modeShow:
		if s := k.String(); s == "esc" || s == "q" || s == "enter" {
			m.mode = modeList
		}
		return m, nil
	case modeConfirm:
		p := m.plan
		m.plan = nil
		if k.String() == "y" {
			m.message, m.isError = p.action+" "+p.id+"…", false
			m.mode = modeList
			return m, m.apply(p)
		}
		m.mode = modeList
		m.message, m.isError = p.action+" cancelled", false
		return m, nil
	}
	s := m.current()
	switch k.String() {
	case "q", "esc":
		if k.String() == "esc" && m.opts.filter != "" {
			m.opts.filter = ""
			m.layout()
			return m, nil
		}
		return m, tea.Quit
	case "up", "k":
		m.move(-1)
	case "down", "j":
		m.move(1)
	case "pgup":
		m.move(-m.listHeight())
	case "pgdown":
		m.move(m.listHeight())
	case "home", "g":
		m.move(-len(m.rows))
	case "end", "G":
		m.move(len(m.rows))
	case "/":
		m.mode, m.input = modeFilter, m.opts.filter
	case ".":
		m.opts.all = !m.opts.all
		m.layout()
	case "enter":
		if s != nil {
			var buf bytes.Buffer
			shown := *m.a
			shown.stdout = &buf
			printSession(&shown, s)
			m.detail, m.mode = buf.String(), modeShow
		}
	case "a":
		if s != nil {
			return m, m.attach(s)
		}
	case "s":
		if s != nil {
			m.mode, m.input, m.sendTo = modeSend, "", keyOf(s)
		}
	case "r", "R", "S", "A":
		if s != nil {
			action := map[string]string{"r": "repair", "R": "reap", "S": "stop", "A": "abort"}[k.String()]
			m.message, m.isError = "planning "+action+"…", false
			return m, m.planFor(action, s)
		}
	}
	return m, nil
}

// typing edits the filter (live) or the prompt to send.
func (m *topModel) typing(k tea.KeyMsg) (tea.Model, tea.Cmd) {
	switch k.Type {
	case tea.KeyEsc:
		if m.mode == modeFilter {
			m.opts.filter = ""
			m.layout()
		}
		m.mode = modeList
		return m, nil
	case tea.KeyEnter:
		mode := m.mode
		m.mode = modeList
		if mode == modeSend && strings.TrimSpace(m.input) != "" && m.sendTo.id != "" {
			return m, m.send(m.sendTo, m.input)
		}
		return m, nil
	case tea.KeyBackspace:
		if r := []rune(m.input); len(r) > 0 {
			m.input = string(r[:len(r)-1])
		}
	case tea.KeySpace:
		m.input += " "
	case tea.KeyRunes:
		m.input += string(k.Runes)
	default:
		return m, nil
	}
	if m.mode == modeFilter {
		m.opts.filter = m.input
		m.layout()
	}
	return m, nil
}

// planFor asks sessiond what action would do on s: a dry run for repair
// and reap; stop and abort act at once when asked, so their plan is said
// here from the session's owner.
func (m *topModel) planFor(action string, s *api.Session) tea.Cmd {
	m.planSeq++
	c, ctx, id, seq := m.clients[s.Host], m.ctx, s.ID, m.planSeq
	switch action {
	case "stop", "abort":
		p := &plan{action: action, host: s.Host, id: id}
		switch {
		case s.PID == 0 || s.Status.Terminal():
			p.err = fmt.Errorf("%s %s: it has no live owner (%s)", action, id, s.Status)
		case action == "stop":
			p.lines = []string{fmt.Sprintf("[ ] SIGTERM to owner pid %d (%s), and to the process group it leads if it leads one", s.PID, s.Agent),
				"[ ] SIGKILL to what is left after 10s"}
		default:
			p.lines = []string{fmt.Sprintf("[ ] abort the turn in progress of %s pid %d, as its agent's own interrupt does", s.Agent, s.PID)}
		}
		return func() tea.Msg { return planMsg{p, seq} }
	}
	return func() tea.Msg {
		res, err := c.Action(ctx, id, action, api.ActionRequest{})
		p := &plan{action: action, host: s.Host, id: id, err: err}
		if err == nil {
			p.lines = checklist(res)
			if len(res.Steps) == 0 {
				p.err = fmt.Errorf("%s %s: nothing to do", action, id)
			}
		}
		return planMsg{p, seq}
	}
}

// apply carries p out and says how it went.
func (m *topModel) apply(p *plan) tea.Cmd {
	c, ctx := m.clients[p.host], m.ctx
	return func() tea.Msg {
		res, err := c.Action(ctx, p.id, p.action, api.ActionRequest{Apply: true})
		if err != nil {
			return resultMsg{err: err}
		}
		var done, failed int
		for _, s := range res.Steps {
			switch s.Outcome {
			case "done":
				done++
			case "failed":
				failed++
			}
		}
		text := fmt.Sprintf("%s %s: %d of %d steps done", p.action, p.id, done, len(res.Steps))
		if failed > 0 {
			return resultMsg{err: fmt.Errorf("%s, %d failed: %s", text, failed, strings.Join(checklist(res), "; "))}
		}
		return resultMsg{text: text}
	}
}

// send gives the prompt to the session now if it is idle, else queues it
// until it is.
func (m *topModel) send(k sessKey, prompt string) tea.Cmd {
	c, ctx, id := m.clients[k.host], m.ctx, k.id
	return func() tea.Msg {
		r, err := c.Send(ctx, id, api.SendRequest{Prompt: prompt, WhenIdle: true})
		switch {
		case err != nil:
			return resultMsg{err: err}
		case r.Queued != nil:
			return resultMsg{text: fmt.Sprintf("queued as %s until %s is idle", r.Queued.ID, id)}
		}
		return resultMsg{text: fmt.Sprintf("delivered to %s via %s", id, r.Via)}
	}
}

// attach runs tmux with the terminal handed over: switch-client returns
// at once inside tmux; attach-session outside returns on detach.
func (m *topModel) attach(s *api.Session) tea.Cmd {
	if c := m.clients[s.Host]; c != nil && c.Remote() {
		m.say(fmt.Errorf("attach %s: its pane is on %s; there, run sessionctl attach %s", s.ID, hostLabel(s.Host), s.ID))
		return nil
	}
	tc, err := attachCommand(s, os.Getenv("TMUX"))
	if err != nil {
		m.say(err)
		return nil
	}
	bin, err := exec.LookPath("tmux")
	if err != nil {
		m.say(fmt.Errorf("attach needs tmux: %w", err))
		return nil
	}
	cmd := exec.Command(bin, tc.argv[1:]...)
	return tea.ExecProcess(cmd, func(err error) tea.Msg {
		if err != nil {
			err = fmt.Errorf("attach %s: %w", s.ID, err)
		}
		return attachedMsg{err}
	})
}

func (m *topModel) View() string {
	if !m.loaded && m.message == "" {
		return "sessionctl top: reading sessions…"
	}
	var b strings.Builder
	title := fmt.Sprintf("sessiond top  %s  %s", m.opts.now.Format("15:04:05"), summary(m.rows))
	if m.opts.filter != "" {
		title += fmt.Sprintf("  filter %q", m.opts.filter)
	}
	if !m.opts.all {
		title += "  (stopped over a day ago hidden: .)"
	}
	b.WriteString(styleHeader.Render(m.fit(title)) + "\n")
	if m.mode == modeShow {
		lines := strings.Split(strings.TrimRight(m.detail, "\n"), "\n")
		for i, l := range lines {
			if i >= m.height-3 {
				break
			}
			b.WriteString(m.fit(l) + "\n")
		}
		b.WriteString("\n" + m.fit("esc: back"))
		return b.String()
	}
	cells := make([][]string, 0, len(m.rows)+1)
	hosts := m.a.hostsNamed()
	cells = append(cells, topHeader(hosts))
	end := min(len(m.rows), m.offset+m.listHeight())
	for i := m.offset; i < end; i++ {
		cells = append(cells, topRowCells(&m.rows[i], m.opts.now, hosts))
	}
	widths := columnWidths(cells, m.width)
	for i, row := range cells {
		line := m.fit(joinCells(row, widths))
		switch {
		case i == 0:
			line = styleHeader.Render(line)
		case m.offset+i-1 == m.cursor:
			line = styleSelected.Render(line)
		default:
			line = rowStyle(&m.rows[m.offset+i-1]).Render(line)
		}
		b.WriteString(line + "\n")
	}
	for i := len(cells); i < m.listHeight()+1; i++ {
		b.WriteString("\n")
	}
	b.WriteString(m.foot())
	return b.String()
}

// foot is the last two lines: what is being typed or confirmed, or the
// last message, then the keys.
func (m *topModel) foot() string {
	var first string
	keys := "enter show  a attach  s send  S stop  A abort  r repair  R reap  / filter  . stopped  q quit"
	switch m.mode {
	case modeFilter:
		first, keys = "filter: "+m.input+"▏", "enter keep  esc clear"
	case modeSend:
		first, keys = "send to "+m.sendTo.id+": "+m.input+"▏", "enter send (queued until idle if busy)  esc cancel"
	case modeConfirm:
		first = m.plan.action + " " + m.plan.id + ": " + strings.Join(m.plan.lines, "; ")
		keys = "y carry it out  any other key: cancel"
	default:
		switch {
		case len(m.stream) > 0:
			first = styleError.Render(m.fit("live updates stopped: " + m.streamText() + "; reconnecting"))
		case m.isError:
			first = styleError.Render(m.fit(m.message))
		default:
			first = m.message
		}
	}
	return m.fit(first) + "\n" + m.fit(keys)
}

// streamText says which hosts' streams are down, and why.
func (m *topModel) streamText() string {
	var parts []string
	for _, h := range m.hosts {
		if why, ok := m.stream[h]; ok {
			parts = append(parts, why)
		}
	}
	return strings.Join(parts, "; ")
}

func (m *topModel) fit(s string) string { return ansi.Truncate(s, m.width, "…") }

func rowStyle(s *api.Session) lipgloss.Style {
	switch view.Rank(s) {
	case 0:
		return styleWaiting
	case 1:
		return styleInterr
	case 2:
		return styleBusy
	case 6:
		return styleStopped
	}
	return lipgloss.NewStyle()
}

// columnWidths fits the columns to width: each as wide as its widest
// cell, the state and the last (where) columns cut first.
func columnWidths(cells [][]string, width int) []int {
	w := make([]int, len(cells[0]))
	for _, row := range cells {
		for i, c := range row {
			w[i] = max(w[i], ansi.StringWidth(c))
		}
	}
	stateCol := slices.Index(cells[0], "STATE")
	total := func() int {
		t := 0
		for _, x := range w {
			t += x + 2
		}
		return t
	}
	if over := total() - width; over > 0 && w[stateCol] > 24 {
		w[stateCol] = max(24, w[stateCol]-over)
	}
	return w
}

func joinCells(row []string, widths []int) string {
	var b strings.Builder
	for i, c := range row {
		if i == len(row)-1 {
			b.WriteString(c)
			break
		}
		c = ansi.Truncate(c, widths[i], "…")
		b.WriteString(c + strings.Repeat(" ", widths[i]-ansi.StringWidth(c)+2))
	}
	return b.String()
}
