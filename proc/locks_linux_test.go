package proc

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseLocks(t *testing.T) {
	// Lines as Linux 6.18 printed them while codex exec 0.169.0 ran.
	in := []byte(`1: FLOCK  ADVISORY  WRITE 12535 fe:00:10347424 0 EOF
2: POSIX  ADVISORY  READ 12535 fe:00:10347419 128 128
3: FLOCK  ADVISORY  READ 77 fe:00:99 0 EOF
4: OFDLCK ADVISORY  WRITE -1 00:2c:5 0 EOF
5: FLOCK  ADVISORY  WRITE 901 103:02:123456 0 EOF
5: -> FLOCK  ADVISORY  WRITE 902 103:02:123456 0 EOF
`)
	got, err := parseLocks(in)
	if err != nil {
		t.Fatal(err)
	}
	want := FlockHolders{
		{Dev: unix.Mkdev(0xfe, 0), Ino: 10347424}: 12535,
		{Dev: unix.Mkdev(0x103, 2), Ino: 123456}:  901,
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%v: got pid %d, want %d", k, got[k], v)
		}
	}
	if _, err := parseLocks([]byte("1: FLOCK ADVISORY WRITE x fe:00:1 0 EOF\n")); err == nil {
		t.Error("a bad pid parsed")
	}
	if _, err := parseLocks([]byte("1: FLOCK ADVISORY WRITE 1 fe00:1 0 EOF\n")); err == nil {
		t.Error("a bad file parsed")
	}
}

// TestFlockHoldersSeesOwnLock takes a real flock and finds it, by the
// file's stat, in the kernel's table; released, it is gone.
func TestFlockHoldersSeesOwnLock(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.lock")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	key := FileKey{Dev: uint64(st.Dev), Ino: st.Ino}
	h := NewHost()
	held, err := h.FlockHolders()
	if err != nil {
		t.Fatal(err)
	}
	if held[key] != os.Getpid() {
		t.Fatalf("lock on %v held by %d, want this process %d", key, held[key], os.Getpid())
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	held, err = h.FlockHolders()
	if err != nil {
		t.Fatal(err)
	}
	if pid, ok := held[key]; ok {
		t.Fatalf("released lock still held by %d", pid)
	}
}
