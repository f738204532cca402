// Package codextest holds rollouts the real Codex CLI wrote (testdata/,
// README.md there says how) and builds Codex homes from them: the
// adapter's tests, the end-to-end tests and the bench read the same real
// lines.
package codextest

import (
	"bytes"
	"embed"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"
)

//go:embed testdata/*.jsonl
var fixtures embed.FS

// Fixture is the real rollout testdata/name.
func Fixture(name string) []byte {
	b, err := fixtures.ReadFile("testdata/" + name)
	if err != nil {
		panic(fmt.Sprintf("codextest: no fixture %s: %v", name, err))
	}
	return b
}

// Fixtures lists the fixture names.
func Fixtures() []string {
	ents, _ := fixtures.ReadDir("testdata")
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// What done.jsonl (a `codex exec` run to its end) is made of: its id, cwd,
// prompt and the one turn's id, which a generated rollout replaces.
const (
	doneID     = "01a2100e-6a76-7f61-8169-3d1e21ad66f1"
	doneCwd    = "/tmp/cx/work"
	donePrompt = `"run it"`
	doneTurn   = "01a2100e-6a9f-7692-905b-3432685f8062"
)

// HomeSpec shapes a generated Codex home.
type HomeSpec struct {
	// Rollouts is how many sessions; Days how many day folders they are
	// spread over (newest today), their mtimes in their day.
	Rollouts, Days int
	// MaxTurns bounds the turns per rollout, log-uniform from 1 (each
	// turn ~13 KB of real lines; the first line alone is ~21 KB).
	MaxTurns int
	// InFlightEvery: every n-th rollout ends mid tool call (a
	// function_call without its output, as a kill -9 leaves it); 0: none.
	InFlightEvery int
	Seed          uint64
}

// Home is a generated home.
type Home struct {
	Root     string
	IDs      []string
	InFlight []string
	Bytes    int64
}

// WriteHome writes spec's rollouts under root/sessions/YYYY/MM/DD/, every
// line a real line of done.jsonl with the session's id, cwd, prompt and
// turn ids in place: the head and tail windows hold what real ones do.
func WriteHome(root string, spec HomeSpec) (*Home, error) {
	tpl := Fixture("done.jsonl")
	lines := bytes.SplitAfter(tpl, []byte("\n"))
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	// lines[0] is the session_meta; lines[1:] one turn, task_started to
	// task_complete; lines[1:11] end on its function_call and the token
	// record after it.
	turn := bytes.Join(lines[1:], nil)
	cut := bytes.Join(lines[1:11], nil)
	rng := rand.New(rand.NewPCG(spec.Seed, 0x636f646578))
	days := max(spec.Days, 1)
	now := time.Now()
	h := &Home{Root: root}
	for i := range spec.Rollouts {
		day := now.AddDate(0, 0, -(i % days))
		id := fmt.Sprintf("%08x-%04x-7%03x-8%03x-%012x", uint32(day.Unix()>>4), i&0xffff, i>>16&0xfff, rng.IntN(0xfff), rng.Uint64()&0xffffffffffff)
		cwd := fmt.Sprintf("/home/user/src/project-%02d", i%40)
		repl := func(b []byte, turnID string) []byte {
			b = bytes.ReplaceAll(b, []byte(doneID), []byte(id))
			b = bytes.ReplaceAll(b, []byte(doneCwd), []byte(cwd))
			b = bytes.ReplaceAll(b, []byte(donePrompt), []byte(fmt.Sprintf(`"fix issue %d in %s"`, i, filepath.Base(cwd))))
			return bytes.ReplaceAll(b, []byte(doneTurn), []byte(turnID))
		}
		n := 1
		if spec.MaxTurns > 1 {
			n = int(math.Exp(rng.Float64() * math.Log(float64(spec.MaxTurns))))
		}
		var buf bytes.Buffer
		buf.Write(repl(lines[0], ""))
		for k := range n {
			buf.Write(repl(turn, fmt.Sprintf("%s-%04x-7000-8000-%012x", id[:8], k, i)))
		}
		inFlight := spec.InFlightEvery > 0 && i%spec.InFlightEvery == spec.InFlightEvery-1
		if inFlight {
			buf.Write(repl(cut, fmt.Sprintf("%s-%04x-7000-8000-%012x", id[:8], n, i)))
			h.InFlight = append(h.InFlight, id)
		}
		dir := filepath.Join(root, "sessions", day.Format("2006"), day.Format("01"), day.Format("02"))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		path := filepath.Join(dir, "rollout-"+day.Format("2006-01-02T15-04-05")+"-"+id+".jsonl")
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			return nil, err
		}
		if i%days != 0 {
			if err := os.Chtimes(path, day, day); err != nil {
				return nil, err
			}
		}
		h.IDs = append(h.IDs, id)
		h.Bytes += int64(buf.Len())
	}
	return h, nil
}
