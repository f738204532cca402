package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// EnvWebScreenshots, when set, is a directory the browser test also
// writes its screenshots to (docs/ to renew the README's).
const EnvWebScreenshots = "SESSIOND_WEB_SCREENSHOTS"

// chromium finds a headless-capable Chromium: Debian's chromium package
// (.ci/run installs it), else another Chrome on PATH. Without one the
// browser tests skip, saying so, except in CI (CI or
// SESSIOND_REQUIRE_BROWSER set), where they fail.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" || os.Getenv("SESSIOND_REQUIRE_BROWSER") != "" {
		t.Fatal("no chromium found: the browser tests need Debian's chromium package (apt-get install -y chromium)")
	}
	t.Skip("no chromium found (apt-get install -y chromium; .ci/run installs it): the web dashboard's browser tests skipped")
	return ""
}

// startWeb runs `sessionctl web` over hosts and returns the URL it
// printed, with its token.
func startWeb(t *testing.T, e *env, hosts ...string) string {
	args := []string{"web", "--listen", "127.0.0.1:0"}
	for _, h := range hosts {
		args = append(args, "--host", h)
	}
	cmd := exec.Command(e.Sessionctl, args...)
	cmd.Env = e.Environ()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logs := filepath.Join(e.Dir, "web.log")
	lf, err := os.Create(logs)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = lf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		lf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logs)
			t.Logf("sessionctl web's log:\n%s", b)
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("sessionctl web printed no URL: %v", err)
	}
	u := strings.TrimSpace(strings.TrimPrefix(line, "sessionctl web: open "))
	if !strings.HasPrefix(u, "http://127.0.0.1:") || !strings.Contains(u, "/?token=") {
		t.Fatalf("sessionctl web printed %q: want its URL with the token", line)
	}
	go io.Copy(io.Discard, out)
	return u
}

// browser starts a headless Chromium, its window w × h.
func browser(t *testing.T, w, h int) context.Context {
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium(t)), chromedp.NoSandbox,
		chromedp.WindowSize(w, h), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	ctx, cancel3 := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(cancel3)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// run runs browser actions, failing the test with what was being done.
func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// waitJS polls a JavaScript expression in the page until it is true. A
// navigation under way destroys the page's context: polling starts again
// in the new page, within the same time.
func waitJS(t *testing.T, ctx context.Context, within time.Duration, what, expr string) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	var err error
	for wctx.Err() == nil {
		var ok bool
		if ok, err = chromedp.Run(wctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(10*time.Millisecond))); err == nil && ok {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	html, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
	t.Fatalf("%s: not within %s (%v); the page reads:\n%s", what, within, err, html)
}

func evalJS[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// screenshot saves the page's viewport as a PNG in dir, and in
// $SESSIOND_WEB_SCREENSHOTS when set.
func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	for _, d := range []string{dir, os.Getenv(EnvWebScreenshots)} {
		if d == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(d, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("screenshot %s: %d bytes in %s", name, len(png), dir)
}

// TestWebInBrowser drives `sessionctl web` in a real headless Chromium
// over two real daemons standing for two hosts: the sessions of both in
// top's order, an owner's kill -9 shown as interrupted within a second
// (with a notification), a prompt sent from the page delivered to a fake
// agent, a stop that asks first, a host that drops named and retried,
// and a phone-width layout with no horizontal scroll; screenshots at
// desktop and phone width.
func TestWebInBrowser(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux not installed (.ci/run installs it): the web dashboard's browser tests need a fake agent in a pane")
	}
	chromium(t)
	shots, err := os.MkdirTemp("", "sessiond-web-shots-")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", shots)

	// Host a: top's five sessions, one busy owner to kill.
	ea := newEnv(t)
	w := newTopWorld(t, ea)
	ea.StartDaemon()
	for _, id := range []*string{&w.waiting, &w.interr, &w.busy, &w.idle, &w.done} {
		*id = ea.Show(*id).ID
	}
	// Host b: a fake claude typed into a shell pane, to send to.
	eb, proj := launchEnv(t)
	pane := newShellPane(eb)
	// and a session stopped three days ago, behind the toggle.
	old := time.Now().Add(-72 * time.Hour)
	eb.Seed(&session.Record{ID: "01d000000b01", Agent: "claude", UpstreamID: "0a0a0a0a-bbbb-4ccc-8ddd-eeeeeeeeeeee", Status: session.StatusStopped,
		Cwd: filepath.Join(eb.Home, "old-work"), Title: "three days ago", CreatedAt: old.Add(-time.Hour), UpdatedAt: old, StoppedAt: &old})
	db := eb.StartDaemon("--claude-bin", fakeClaude(t))
	// Each turn takes a while: a prompt queued meanwhile waits for it.
	fake, _ := pane.startClaude(proj, "FAKE_CLAUDE_TURN=3s")
	hostA, hostB := "unix://"+ea.Socket, "unix://"+eb.Socket

	u := startWeb(t, ea, hostA, hostB)
	ctx := browser(t, 1600, 1000)

	// The URL with the token: its cookie opens the page, and the token
	// leaves the address bar.
	run(t, ctx, "open the printed URL", chromedp.Navigate(u))
	waitJS(t, ctx, 15*time.Second, "the six sessions of both hosts", `document.querySelectorAll('.row').length === 6`)
	if loc := evalJS[string](t, ctx, `location.href`); strings.Contains(loc, "token") {
		t.Errorf("the address still has the token: %s", loc)
	}
	order := evalJS[[]string](t, ctx, `[...document.querySelectorAll('.row')].map(r => r.dataset.id)`)
	states := evalJS[[]string](t, ctx, `[...document.querySelectorAll('.row')].map(r => r.dataset.state)`)
	rowHosts := evalJS[[]string](t, ctx, `[...document.querySelectorAll('.row')].map(r => r.dataset.host)`)
	t.Logf("rows: %v %v", order, states)
	if !slices.Equal(states, []string{"waiting", "interrupted", "busy", "idle", "idle", "stopped"}) ||
		order[0] != w.waiting || order[1] != w.interr || order[2] != w.busy || order[5] != w.done ||
		!slices.Contains(order, fake.ID) || !slices.Contains(rowHosts, hostA) || !slices.Contains(rowHosts, hostB) {
		t.Fatalf("rows %v, states %v, hosts %v: want top's order over both hosts", order, states, rowHosts)
	}
	if txt := evalJS[string](t, ctx, `document.querySelector('.row').innerText`); !strings.Contains(txt, "permission") {
		t.Errorf("the waiting row does not say what it waits for: %q", txt)
	}
	// The filter and the toggle of old stopped sessions.
	run(t, ctx, "filter", chromedp.SendKeys(chromedp.CSS("#filter"), filepath.Base(proj)))
	waitJS(t, ctx, 5*time.Second, "the filter keeps the one session in "+proj, `document.querySelectorAll('.row').length === 1`)
	evalJS[bool](t, ctx, `const f = document.getElementById('filter'); f.value = ''; f.dispatchEvent(new Event('input'))`)
	waitJS(t, ctx, 5*time.Second, "all rows back", `document.querySelectorAll('.row').length === 6`)
	run(t, ctx, "show the old stopped sessions", chromedp.Click(chromedp.CSS("#old")))
	waitJS(t, ctx, 5*time.Second, "the session stopped three days ago, last", `document.querySelectorAll('.row').length === 7 && [...document.querySelectorAll('.row')].pop().dataset.id === '01d000000b01'`)
	run(t, ctx, "hide them again", chromedp.Click(chromedp.CSS("#old")))
	waitJS(t, ctx, 5*time.Second, "six rows again", `document.querySelectorAll('.row').length === 6`)
	screenshot(t, ctx, shots, "web-desktop.png")
	// The web app manifest the page links, as the browser fetches it (with
	// the cookie: the link asks for credentials), and its icon.
	manifest, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(async () => {
		const m = await (await fetch(document.querySelector('link[rel=manifest]').href, { credentials: 'include' })).json();
		const icon = await fetch(m.icons[0].src);
		return m.name + ' ' + m.display + ' ' + m.start_url + ' ' + icon.status + ' ' + icon.headers.get('content-type');
	})()`, chromedp.EvalAwaitPromise))
	if err != nil || manifest != "sessiond standalone / 200 image/svg+xml" {
		t.Errorf("the manifest and its icon: %q, %v", manifest, err)
	}
	if cred := evalJS[string](t, ctx, `document.querySelector('link[rel=manifest]').crossOrigin`); cred != "use-credentials" {
		t.Errorf("the manifest link's crossorigin is %q: without use-credentials the browser fetches it without the cookie (401)", cred)
	}

	// kill -9 of the busy session's owner: interrupted in the page within
	// a second, and a notification says so.
	evalJS[bool](t, ctx, `window.__notes = [];
		window.Notification = class { constructor(title, o) { __notes.push(title + ' | ' + (o && o.body)); } static get permission() { return 'granted'; } };
		true`)
	killed := time.Now()
	w.busyOwner.Process.Signal(syscall.SIGKILL)
	w.busyOwner.Wait()
	waitJS(t, ctx, 1*time.Second, "the killed owner's session interrupted in the page",
		fmt.Sprintf(`document.querySelector('.row[data-id=%q]').dataset.state === 'interrupted'`, w.busy))
	t.Logf("kill -9 to interrupted in the page: %s", time.Since(killed).Round(time.Millisecond))
	waitJS(t, ctx, 2*time.Second, "a notification of the interruption", `__notes.some(n => n.includes('interrupted'))`)

	// Send: from the fake claude's page, delivered to the agent.
	run(t, ctx, "open the fake agent's page", chromedp.Click(chromedp.CSS(fmt.Sprintf(`.row[data-id=%q]`, fake.ID))))
	waitJS(t, ctx, 10*time.Second, "the session's fields", fmt.Sprintf(`document.getElementById('fields').innerText.includes(%q)`, fake.ID))
	waitJS(t, ctx, 10*time.Second, "its recent events", `document.querySelectorAll('#events li').length > 0`)
	prompt := "hello from the web page"
	run(t, ctx, "type and send the prompt", chromedp.SendKeys(chromedp.CSS("#prompt"), prompt), chromedp.Click(chromedp.CSS("#send-now")))
	waitJS(t, ctx, 15*time.Second, "the page says delivered", `document.getElementById('message').innerText.includes('delivered')`)
	testenv.EventuallyOK(t, 15*time.Second, "the fake agent took the prompt", func() (bool, string) {
		return slices.Contains(pane.taken(), prompt), fmt.Sprintf("%q\n%s", pane.taken(), pane.capture())
	})
	// While its turn runs: "send now" is refused and says why; "queue
	// until idle" queues, and the agent takes it once the turn is over.
	run(t, ctx, "send another now", chromedp.SendKeys(chromedp.CSS("#prompt"), "not now"), chromedp.Click(chromedp.CSS("#send-now")))
	waitJS(t, ctx, 10*time.Second, "the refusal, said", `document.getElementById('message').className === 'error' && document.getElementById('message').innerText.length > 0`)
	t.Logf("send now during a turn: %s", evalJS[string](t, ctx, `document.getElementById('message').innerText`))
	evalJS[bool](t, ctx, `document.getElementById('prompt').value = ''; true`)
	run(t, ctx, "queue one", chromedp.SendKeys(chromedp.CSS("#prompt"), "a queued prompt"), chromedp.Click(chromedp.CSS("#send-queued")))
	waitJS(t, ctx, 10*time.Second, "queued, said", `document.getElementById('message').innerText.startsWith('queued as ')`)
	testenv.EventuallyOK(t, 20*time.Second, "the queued prompt taken after the first, and the refused one never", func() (bool, string) {
		return slices.Equal(pane.taken(), []string{prompt, "a queued prompt"}), fmt.Sprintf("%q\n%s", pane.taken(), pane.capture())
	})
	screenshot(t, ctx, shots, "web-session.png")

	// Stop asks first: the plan in a dialog; cancel leaves the owner
	// alone, confirm stops it.
	idle := ea.Show(w.idle)
	owner := proc.Identity{BootID: idle.BootID, PID: idle.PID, StartTicks: idle.PIDStart}
	ownerAlive := func() bool { return proc.NewHost().Probe(owner).Liveness == proc.Alive }
	run(t, ctx, "open the idle session's page", chromedp.Navigate(strings.SplitN(u, "/?", 2)[0]+"/session?host="+url.QueryEscape(hostA)+"&id="+idle.ID))
	waitJS(t, ctx, 10*time.Second, "the idle session's fields", fmt.Sprintf(`document.getElementById('fields').innerText.includes(%q)`, idle.ID))
	run(t, ctx, "press stop", chromedp.Click(chromedp.CSS(`button[data-action="stop"]`)))
	waitJS(t, ctx, 5*time.Second, "the stop's plan, asking", `document.getElementById('confirm').open`)
	plan := evalJS[string](t, ctx, `document.getElementById('plan').innerText`)
	if !strings.Contains(plan, fmt.Sprintf("SIGTERM to owner pid %d", idle.PID)) {
		t.Errorf("the stop's plan: %q", plan)
	}
	time.Sleep(300 * time.Millisecond)
	if !ownerAlive() || ea.Show(idle.ID).Status != session.StatusRunning {
		t.Fatal("the owner was stopped before the stop was confirmed")
	}
	run(t, ctx, "cancel", chromedp.Click(chromedp.CSS("#confirm-no")))
	waitJS(t, ctx, 5*time.Second, "cancelled", `document.getElementById('message').innerText.includes('stop cancelled')`)
	time.Sleep(300 * time.Millisecond)
	if !ownerAlive() {
		t.Fatal("a cancelled stop stopped the owner")
	}
	run(t, ctx, "press stop and confirm", chromedp.Click(chromedp.CSS(`button[data-action="stop"]`)))
	waitJS(t, ctx, 5*time.Second, "the stop's plan again", `document.getElementById('confirm').open`)
	run(t, ctx, "confirm", chromedp.Click(chromedp.CSS("#confirm-yes")))
	waitJS(t, ctx, 15*time.Second, "the stop done", `document.getElementById('message').innerText.includes('steps done')`)
	waitJS(t, ctx, 15*time.Second, "the session stopped in the page", `!['running', 'starting'].some(s => document.getElementById('summary').innerText.startsWith(s) || document.getElementById('summary').innerText.startsWith('idle'))`)
	testenv.Eventually(t, 15*time.Second, "the owner ended", func() bool { return !ownerAlive() })

	// Repair: sessiond's dry run shown first; cancelled, nothing
	// changes; confirmed, the plan is carried out.
	before := ea.Show(w.interr)
	run(t, ctx, "open the interrupted session's page", chromedp.Navigate(strings.SplitN(u, "/?", 2)[0]+"/session?host="+url.QueryEscape(hostA)+"&id="+w.interr))
	waitJS(t, ctx, 10*time.Second, "the interrupted session's fields", fmt.Sprintf(`document.getElementById('fields').innerText.includes(%q)`, w.interr))
	run(t, ctx, "press repair", chromedp.Click(chromedp.CSS(`button[data-action="repair"]`)))
	waitJS(t, ctx, 10*time.Second, "the repair's dry-run plan, asking", `document.getElementById('confirm').open`)
	plan = evalJS[string](t, ctx, `document.getElementById('plan').innerText`)
	t.Logf("repair's plan in the page:\n%s", plan)
	if !strings.Contains(plan, "[ ]") {
		t.Errorf("the repair's plan has no planned step: %q", plan)
	}
	run(t, ctx, "cancel the repair", chromedp.Click(chromedp.CSS("#confirm-no")))
	waitJS(t, ctx, 5*time.Second, "repair cancelled", `document.getElementById('message').innerText.includes('repair cancelled')`)
	if after := ea.Show(w.interr); len(after.Problems) != len(before.Problems) {
		t.Fatalf("a cancelled repair changed the session: problems %v, before %v", after.Problems, before.Problems)
	}
	run(t, ctx, "press repair and confirm", chromedp.Click(chromedp.CSS(`button[data-action="repair"]`)))
	waitJS(t, ctx, 10*time.Second, "the repair's plan again", `document.getElementById('confirm').open`)
	run(t, ctx, "confirm the repair", chromedp.Click(chromedp.CSS("#confirm-yes")))
	waitJS(t, ctx, 15*time.Second, "the repair done", `/repair \S+: [1-9]\d* of \d+ steps done$/.test(document.getElementById('message').innerText)`)
	testenv.EventuallyOK(t, 10*time.Second, "the stale busy marker repaired", func() (bool, string) {
		x := ea.Show(w.interr)
		return x.Problem(session.ProblemStaleBusyMarker) == nil, fmt.Sprintf("%v", x.Problems)
	})

	// Phone width: no horizontal scroll, on the list and a session.
	for _, page := range []string{"/", "/session?host=" + url.QueryEscape(hostB) + "&id=" + fake.ID} {
		run(t, ctx, "phone width "+page, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile),
			chromedp.Navigate(strings.SplitN(u, "/?", 2)[0]+page))
		waitJS(t, ctx, 10*time.Second, "the page filled at phone width", `document.querySelectorAll('.row').length > 0 || document.getElementById('fields')?.innerText.length > 0`)
		if w, sw := evalJS[float64](t, ctx, `document.documentElement.clientWidth`), evalJS[float64](t, ctx, `document.documentElement.scrollWidth`); w != 390 || sw > w {
			t.Errorf("%s at phone width: scrollWidth %v > clientWidth %v (a horizontal scroll)", page, sw, w)
		}
		if page == "/" {
			screenshot(t, ctx, shots, "web-phone.png")
		}
	}

	// A host that drops is named, and retried: back once it is.
	run(t, ctx, "desktop width", chromedp.EmulateViewport(1600, 1000), chromedp.Navigate(strings.SplitN(u, "/?", 2)[0]+"/"))
	waitJS(t, ctx, 10*time.Second, "the list", `document.querySelectorAll('.row').length > 0`)
	db.Kill()
	waitJS(t, ctx, 10*time.Second, "host b named as down", fmt.Sprintf(`document.getElementById('hosts').innerText.includes(%q)`, strings.TrimPrefix(hostB, "unix://")))
	eb.StartDaemon("--claude-bin", fakeClaude(t))
	waitJS(t, ctx, 15*time.Second, "host b back", `document.getElementById('hosts').innerText === ''`)
	waitJS(t, ctx, 10*time.Second, "host b's session listed again", fmt.Sprintf(`!!document.querySelector('.row[data-id=%q]')`, fake.ID))
}

// TestWebRefusals: the running `sessionctl web` answers a request
// without its token 401, a foreign Host 403, a POST without the token
// header or from a foreign Origin 403 — what a browser elsewhere, a
// rebinding DNS name or a cross-site form would send.
func TestWebRefusals(t *testing.T) {
	e := newEnv(t)
	e.StartDaemon()
	u := startWeb(t, e)
	pu, _ := url.Parse(u)
	base := "http://" + pu.Host
	token := pu.Query().Get("token")
	noRedirect := &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	try := func(method, path, host, cookie, header, origin string) int {
		t.Helper()
		r, _ := http.NewRequest(method, base+path, strings.NewReader(`{"id":"nope","prompt":"x"}`))
		if host != "" {
			r.Host = host
		}
		if cookie != "" {
			r.AddCookie(&http.Cookie{Name: "sessiond_web", Value: cookie})
		}
		if header != "" {
			r.Header.Set("X-Sessiond-Token", header)
		}
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		resp, err := noRedirect.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		what                                       string
		method, path, host, cookie, header, origin string
		want                                       int
	}{
		{"the page without the token", "GET", "/", "", "", "", "", 401},
		{"the stream without the token", "GET", "/events", "", "", "", "", 401},
		{"a wrong token", "GET", "/?token=wrong", "", "", "", "", 401},
		{"the token URL", "GET", "/?token=" + token, "", "", "", "", 303},
		{"the page with the cookie", "GET", "/", "", token, "", "", 200},
		{"a foreign Host", "GET", "/", "rebound.example:" + pu.Port(), token, "", "", 403},
		{"a POST without the header", "POST", "/api/send", "", token, "", base, 403},
		{"a POST from a foreign Origin", "POST", "/api/send", "", token, token, "http://evil.example", 403},
		{"a POST without an Origin", "POST", "/api/send", "", token, token, "", 403},
		{"a proper POST (no such session: sessiond's 404)", "POST", "/api/send", "", token, token, base, 404},
	} {
		if got := try(c.method, c.path, c.host, c.cookie, c.header, c.origin); got != c.want {
			t.Errorf("%s: %d, want %d", c.what, got, c.want)
		}
	}

	// Not loopback: refused without --allow-network (exit 2); with it, the
	// log says the dashboard is reachable from the network.
	if _, errs, code := e.Ctl("web", "--listen", "0.0.0.0:0"); code != 2 || !strings.Contains(errs, "--allow-network") {
		t.Errorf("web --listen 0.0.0.0:0: exit %d, %q; want 2 naming --allow-network", code, errs)
	}
	cmd := exec.Command(e.Sessionctl, "web", "--listen", "0.0.0.0:0", "--allow-network")
	cmd.Env = e.Environ()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	sc := bufio.NewScanner(stderr)
	warned := false
	for !warned && sc.Scan() {
		warned = strings.Contains(sc.Text(), "WARN") && strings.Contains(sc.Text(), "reachable from the network")
	}
	if !warned {
		t.Error("web --allow-network on 0.0.0.0 did not warn that it is reachable from the network")
	}
}

// The page's actions are sessiond's: two stops of one session posted at
// once act once (the second, rechecking once it may act, finds no owner
// left), and a stop of a session whose owner died a moment before, its
// record still running, signals nothing. No browser needed: the page
// posts exactly these requests.
func TestWebActsOnce(t *testing.T) {
	e := newEnv(t)
	victimCmd, victim := daemontest.StartOwner(t)
	_, gone := daemontest.StartOwner(t)
	const victimID, goneID = "5e55000000a1", "5e55000000a2"
	now := time.Now()
	e.Seed(
		&session.Record{ID: victimID, Agent: "claude", UpstreamID: "11111111-2222-4333-8444-555555555551",
			Status: session.StatusRunning, Activity: session.ActivityIdle, Owner: &victim, Cwd: filepath.Join(e.Home, "p1"), CreatedAt: now},
		&session.Record{ID: goneID, Agent: "claude", UpstreamID: "11111111-2222-4333-8444-555555555552",
			Status: session.StatusRunning, Activity: session.ActivityIdle, Owner: &gone, Cwd: filepath.Join(e.Home, "p2"), CreatedAt: now},
	)
	// A pass an hour: the records stay as seeded unless an action looks.
	e.StartDaemon("--reconcile-interval", "1h", "--no-exit-events")
	u := startWeb(t, e)
	pu, _ := url.Parse(u)
	base := "http://" + pu.Host
	token := pu.Query().Get("token")
	post := func(id string) (int, string) {
		r, _ := http.NewRequest("POST", base+"/api/action", strings.NewReader(fmt.Sprintf(`{"id":%q,"action":"stop","apply":true}`, id)))
		r.AddCookie(&http.Cookie{Name: "sessiond_web", Value: token})
		r.Header.Set("X-Sessiond-Token", token)
		r.Header.Set("Origin", base)
		r.Header.Set("Content-Type", "application/json")
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(r)
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	codes := make([]int, 2)
	bodies := make([]string, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); codes[i], bodies[i] = post(victimID) }()
	}
	wg.Wait()
	slices.Sort(codes)
	if codes[0] != http.StatusOK || codes[1] != http.StatusConflict {
		t.Fatalf("two stops at once: %v %q; want one 200 and one 409", codes, bodies)
	}
	for _, b := range bodies {
		if strings.Contains(b, "not_running") != !strings.Contains(b, `"applied":true`) {
			t.Errorf("answer %s: neither the stop applied nor not_running", b)
		}
	}
	if err := victimCmd.Wait(); err == nil {
		t.Error("the victim exited cleanly: it was not signalled")
	}

	daemontest.KillOwner(t, gone)
	if code, body := post(goneID); code != http.StatusConflict || !strings.Contains(body, "not_running") {
		t.Errorf("stop of a session whose owner just died: %d %s; want 409 not_running", code, body)
	}
}
