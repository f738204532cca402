package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/sessiond/sessiond/api"
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
		ss  []api.Session
		err error
	}
	sessionMsg struct {
		id  string
		s   *api.Session
		err error
	}
	eventMsg  api.Event
	streamMsg struct{ err error } // the stream broke (nil: it is back)
	tickMsg   time.Time
	planMsg   struct {
		p   *plan
		seq int // the request it answers (topModel.planSeq)
	}
	resultMsg struct {
		text string
		err  error
	}
	attachedMsg struct{ err error }
)

// plan is an action shown before it is carried out.
type plan struct {
	action string // repair, reap, stop, abort
	id     string
	lines  []string
	err    error
}

type topModel struct {
	ctx context.Context
	a   *app
	// c is the one client of the view: one connection pool for every
	// fetch, not one per event.
	c    *api.Client
	opts topOptions

	sessions map[string]api.Session
	rows     []api.Session
	selected string // the selected session's id: kept across reorders
	cursor   int
	offset   int
	width    int
	height   int

	mode  topMode
	input string // the filter or prompt being typed
	// sendTo is the session a prompt being typed goes to: chosen when
	// s was pressed, whatever the rows do meanwhile.
	sendTo string
	plan   *plan
	// planSeq numbers plan requests: a plan is shown only if it answers
	// the latest one and the list is still what has the keys.
	planSeq int
	detail  string
	message string
	isError bool
	stream  string // why the event stream is down, "" when it is up
	loaded  bool
	// fetching holds sessions whose fetch is under way, so a burst of
	// events for one session fetches it once.
	fetching map[string]bool
	refetch  map[string]bool
	// listing is set while a whole list is on its way; touched holds the
	// sessions events named meanwhile, fetched again once it lands (the
	// list may have been read before their change).
	listing bool
	touched map[string]bool
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
	c := a.client()
	m := &topModel{ctx: ctx, a: a, c: c, opts: o, sessions: map[string]api.Session{},
		fetching: map[string]bool{}, refetch: map[string]bool{}, width: 120, height: 30}
	// The stream starts from the log's end as of now; the list is read
	// after that, so no change falls between the two.
	h, err := c.Health(ctx)
	if err != nil {
		return err
	}
	p := tea.NewProgram(m, tea.WithAltScreen(), tea.WithContext(ctx), tea.WithOutput(a.stdout))
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go follow(sctx, c, h.LastEventSeq, p)
	_, err = p.Run()
	if errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		return nil
	}
	return err
}

// follow streams events into the program, reconnecting (and reloading
// the list) after the stream breaks, until ctx ends.
func follow(ctx context.Context, c *api.Client, since uint64, p *tea.Program) {
	for {
		err := c.Events(ctx, api.EventsOptions{Since: since, Follow: true}, func(ev api.Event) error {
			since = ev.Seq
			p.Send(eventMsg(ev))
			return nil
		})
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("the event stream ended")
		}
		p.Send(streamMsg{err})
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		p.Send(streamMsg{nil})
	}
}

func (m *topModel) Init() tea.Cmd { return tea.Batch(m.load(), tick()) }

func tick() tea.Cmd {
	return tea.Tick(time.Second, func(t time.Time) tea.Msg { return tickMsg(t) })
}

// load reads every session.
func (m *topModel) load() tea.Cmd {
	m.listing, m.touched = true, map[string]bool{}
	c, ctx := m.c, m.ctx
	return func() tea.Msg {
		ss, err := c.Sessions(ctx, api.ListOptions{All: true})
		return listMsg{ss, err}
	}
}

// applyList takes a whole list as the sessions shown. A session already
// shown in a newer form than the list's (fetched for an event while the
// list was read) keeps it; one the list lacks but an event named
// meanwhile (created since) is kept; the sessions named meanwhile are
// fetched once more, so none stays as the list saw it.
func (m *topModel) applyList(ss []api.Session) tea.Cmd {
	next := make(map[string]api.Session, len(ss))
	for _, s := range ss {
		if old, ok := m.sessions[s.ID]; ok && old.UpdatedAt.After(s.UpdatedAt) {
			s = old
		}
		next[s.ID] = s
	}
	var cmds []tea.Cmd
	for id := range m.touched {
		if old, ok := m.sessions[id]; ok {
			if _, listed := next[id]; !listed {
				next[id] = old
			}
		}
		cmds = append(cmds, m.fetch(id))
	}
	m.sessions = next
	m.listing, m.touched = false, nil
	return tea.Batch(cmds...)
}

// fetch reads one session, once at a time per session.
func (m *topModel) fetch(id string) tea.Cmd {
	if m.fetching[id] {
		m.refetch[id] = true
		return nil
	}
	m.fetching[id] = true
	c, ctx := m.c, m.ctx
	return func() tea.Msg {
		s, err := c.Session(ctx, id)
		return sessionMsg{id, s, err}
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
			m.say(msg.err)
			break
		}
		m.loaded = true
		cmd = m.applyList(msg.ss)
	case sessionMsg:
		delete(m.fetching, msg.id)
		var se *api.StatusError
		switch {
		case msg.err == nil:
			// A fetch that left before a newer list or fetch landed
			// does not take its place.
			if old, ok := m.sessions[msg.id]; !ok || !old.UpdatedAt.After(msg.s.UpdatedAt) {
				m.sessions[msg.id] = *msg.s
			}
		case errors.As(msg.err, &se) && se.Body.Code == api.CodeNotFound:
			delete(m.sessions, msg.id)
		default:
			m.say(msg.err)
		}
		if m.refetch[msg.id] {
			delete(m.refetch, msg.id)
			cmd = m.fetch(msg.id)
		}
	case eventMsg:
		if m.listing {
			m.touched[msg.SessionID] = true
		}
		return m, m.fetch(msg.SessionID)
	case streamMsg:
		if msg.err != nil {
			m.stream = msg.err.Error()
			break
		}
		m.stream = ""
		return m, m.load()
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
		if m.rows[i].ID == m.selected {
			m.cursor = i
			break
		}
	}
	if len(m.rows) > 0 {
		m.selected = m.rows[m.cursor].ID
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
	m.selected = m.rows[m.cursor].ID
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
			m.mode, m.input, m.sendTo = modeSend, "", s.ID
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
		if mode == modeSend && strings.TrimSpace(m.input) != "" && m.sendTo != "" {
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
	c, ctx, id, seq := m.c, m.ctx, s.ID, m.planSeq
	switch action {
	case "stop", "abort":
		p := &plan{action: action, id: id}
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
		p := &plan{action: action, id: id, err: err}
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
	c, ctx := m.c, m.ctx
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
func (m *topModel) send(id, prompt string) tea.Cmd {
	c, ctx := m.c, m.ctx
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
	cells = append(cells, topColumns)
	end := min(len(m.rows), m.offset+m.listHeight())
	for i := m.offset; i < end; i++ {
		cells = append(cells, topCells(&m.rows[i], m.opts.now))
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
		first, keys = "send to "+m.sendTo+": "+m.input+"▏", "enter send (queued until idle if busy)  esc cancel"
	case modeConfirm:
		first = m.plan.action + " " + m.plan.id + ": " + strings.Join(m.plan.lines, "; ")
		keys = "y carry it out  any other key: cancel"
	default:
		switch {
		case m.stream != "":
			first = styleError.Render(m.fit("live updates stopped: " + m.stream + "; reconnecting"))
		case m.isError:
			first = styleError.Render(m.fit(m.message))
		default:
			first = m.message
		}
	}
	return m.fit(first) + "\n" + m.fit(keys)
}

func (m *topModel) fit(s string) string { return ansi.Truncate(s, m.width, "…") }

func rowStyle(s *api.Session) lipgloss.Style {
	switch attentionRank(s) {
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
	w := make([]int, len(topColumns))
	for _, row := range cells {
		for i, c := range row {
			w[i] = max(w[i], ansi.StringWidth(c))
		}
	}
	const stateCol = 2
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
