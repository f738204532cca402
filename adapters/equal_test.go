package adapters

import (
	"reflect"
	"testing"
	"time"

	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// A field added to Observed, Owner or Issue and left out of Equal would
// let a changed session hide in a reused QuietSet: every field, changed
// alone, must make Equal false.
func TestEqualSeesEveryField(t *testing.T) {
	base := func() Observed {
		at := time.Unix(1700000000, 0)
		id := proc.Identity{BootID: "b", PID: 7, StartTicks: 9}
		dead := proc.Result{Liveness: proc.Dead, Reason: "gone"}
		return Observed{UpstreamID: "u", Source: "s", Root: "r", Cwd: "c", Title: "t",
			Owners:   []Owner{{Identity: id, Evidence: "e", NoProbe: &dead}},
			Activity: session.ActivityIdle, ActivityEvidence: "ae", ActivitySource: session.SourceTranscript,
			ActivityAt: at, WaitingFor: &session.WaitingFor{Kind: "permission", Tool: "Bash"}, LastActivity: at,
			InFlight: []Issue{{Kind: "k", Key: "1", Detail: "d", Since: at, Process: &id}},
			Problems: []Issue{{Kind: "p", Key: "2"}}, OwnersExact: "x", Stamp: 3}
	}
	a, b := base(), base()
	if !a.Equal(&b) {
		t.Fatal("two equal observations are not Equal")
	}
	// The same instants read in another location are the same.
	b.LastActivity = b.LastActivity.In(time.FixedZone("x", 3600))
	if !a.Equal(&b) {
		t.Fatal("one instant in two locations is not Equal")
	}
	eachField(t, reflect.TypeOf(Observed{}), func(name string, change func(reflect.Value)) {
		o, p := base(), base()
		change(reflect.ValueOf(&p).Elem())
		if o.Equal(&p) {
			t.Errorf("Observed.%s changed alone, and Equal says the same", name)
		}
	})
	eachField(t, reflect.TypeOf(Owner{}), func(name string, change func(reflect.Value)) {
		o, p := base(), base()
		change(reflect.ValueOf(&p.Owners[0]).Elem())
		if o.Equal(&p) {
			t.Errorf("Owner.%s changed alone, and Equal says the same", name)
		}
	})
	eachField(t, reflect.TypeOf(Issue{}), func(name string, change func(reflect.Value)) {
		o, p := base(), base()
		change(reflect.ValueOf(&p.InFlight[0]).Elem())
		if o.Equal(&p) {
			t.Errorf("Issue.%s changed alone, and Equal says the same", name)
		}
	})
}

// eachField calls fn for each field of struct type typ with a function
// that changes that field of a value of typ to another value.
func eachField(t *testing.T, typ reflect.Type, fn func(name string, change func(reflect.Value))) {
	for i := range typ.NumField() {
		f := typ.Field(i)
		fn(f.Name, func(v reflect.Value) {
			fv := v.Field(i)
			switch fv.Kind() {
			case reflect.String:
				fv.SetString(fv.String() + "'")
			case reflect.Bool:
				fv.SetBool(!fv.Bool())
			case reflect.Uint64:
				fv.SetUint(fv.Uint() + 1)
			case reflect.Slice:
				if fv.Len() == 0 {
					fv.Set(reflect.MakeSlice(fv.Type(), 1, 1))
				} else {
					fv.Set(fv.Slice(0, fv.Len()-1))
				}
			case reflect.Pointer:
				if fv.IsNil() {
					fv.Set(reflect.New(fv.Type().Elem()))
				} else {
					fv.Set(reflect.Zero(fv.Type()))
				}
			case reflect.Struct:
				switch x := fv.Addr().Interface().(type) {
				case *time.Time:
					*x = x.Add(time.Second)
				case *proc.Identity:
					x.PID++
				default:
					t.Fatalf("field %s: no way to change a %s; teach the test", f.Name, fv.Type())
				}
			default:
				t.Fatalf("field %s: no way to change a %s; teach the test", f.Name, fv.Type())
			}
		})
	}
}
