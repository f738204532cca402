package kit

import (
	"fmt"
	"testing"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/proc"
)

func quietObs(n int) []adapters.Observed {
	obs := make([]adapters.Observed, n)
	for i := range obs {
		obs[i] = adapters.Observed{UpstreamID: fmt.Sprintf("s%03d", i), Source: fmt.Sprintf("/h/%d.jsonl", i), Title: "t"}
	}
	return obs
}

func TestQuietSplit(t *testing.T) {
	var q Quiet
	obs := quietObs(5)
	id := proc.Identity{BootID: "b", PID: 10, StartTicks: 1}
	obs[1].Owners = []adapters.Owner{{Identity: id}}
	obs[3].Problems = []adapters.Issue{{Kind: "orphan_processes", Key: "11", Process: &id}}
	loud, set := q.Split(obs)
	if len(loud) != 2 || loud[0].UpstreamID != "s001" || loud[1].UpstreamID != "s003" {
		t.Fatalf("loud = %v, want the owned s001 and the orphaned s003", loud)
	}
	for _, up := range []string{"s000", "s002", "s004"} {
		if set.Find(up) == nil {
			t.Errorf("quiet %s not in the set", up)
		}
	}
	if set.Find("s001") != nil || set.Find("s003") != nil {
		t.Error("a loud session is in the set")
	}
	// The caller's list is its own: changing it changes no set.
	obs[0].Title = "changed after"
	if set.Find("s000").Title != "t" {
		t.Fatal("the set shares the caller's list")
	}

	// The same quiet sessions, built afresh: the same set.
	again := quietObs(5)
	again[1].Owners = []adapters.Owner{{Identity: id}}
	again[3].Problems = obs[3].Problems
	if _, s := q.Split(again); s != set {
		t.Fatal("equal quiet sessions made a new set")
	}
	// A loud session's change keeps the set.
	again[1].Owners[0].Evidence = "other"
	if _, s := q.Split(again); s != set {
		t.Fatal("a loud session's change made a new set")
	}

	for name, change := range map[string]func([]adapters.Observed){
		"a quiet session changed":     func(o []adapters.Observed) { o[2].Title = "new title" },
		"a quiet session became loud": func(o []adapters.Observed) { o[4].Owners = []adapters.Owner{{Identity: id}} },
		"a loud session became quiet": func(o []adapters.Observed) { o[1].Owners = nil },
		"a session gone":              func(o []adapters.Observed) {},
	} {
		t.Run(name, func(t *testing.T) {
			var q Quiet
			base := quietObs(5)
			base[1].Owners = []adapters.Owner{{Identity: id}}
			_, first := q.Split(base)
			next := quietObs(5)
			next[1].Owners = []adapters.Owner{{Identity: id}}
			change(next)
			if name == "a session gone" {
				next = next[:4]
			}
			_, s := q.Split(next)
			if s == first {
				t.Fatal("the last set handed out again")
			}
			want := 0
			for i := range next {
				if !IsLoud(&next[i]) {
					want++
					if f := s.Find(next[i].UpstreamID); f == nil || !f.Equal(&next[i]) {
						t.Errorf("%s: set holds %+v, want %+v", next[i].UpstreamID, f, next[i])
					}
				}
			}
			got := 0
			s.Each(func(*adapters.Observed) bool { got++; return true })
			if got != want {
				t.Errorf("set holds %d sessions, want %d", got, want)
			}
			if _, again := q.Split(next); again != s {
				t.Error("the same sessions again made yet another set")
			}
		})
	}
}

// Unsorted input still makes a set the tracker can search.
func TestQuietSplitSorts(t *testing.T) {
	var q Quiet
	obs := quietObs(4)
	obs[0], obs[3] = obs[3], obs[0]
	_, set := q.Split(obs)
	for i := range obs {
		if set.Find(obs[i].UpstreamID) == nil {
			t.Errorf("%s not found in the set", obs[i].UpstreamID)
		}
	}
}

// Again hands out the last set only for the key it was built at, and only
// when that pass had no loud session; a Split without a key forgets it.
func TestQuietAgain(t *testing.T) {
	var q Quiet
	k := Key{1, 2}
	if _, ok := q.Again(k); ok {
		t.Fatal("a set before any split")
	}
	_, set := q.SplitAt(k, quietObs(3))
	if s, ok := q.Again(k); !ok || s != set {
		t.Fatal("the same key: not the last set")
	}
	if _, ok := q.Again(Key{1, 3}); ok {
		t.Fatal("another key: the last set")
	}
	loud := quietObs(3)
	loud[0].Owners = []adapters.Owner{{Identity: proc.Identity{PID: 1}}}
	q.SplitAt(k, loud)
	if _, ok := q.Again(k); ok {
		t.Fatal("a pass with a loud session: the set alone handed out again")
	}
	q.SplitAt(k, quietObs(3))
	q.Split(quietObs(3))
	if _, ok := q.Again(k); ok {
		t.Fatal("after a Split without a key: the set handed out again")
	}
}
