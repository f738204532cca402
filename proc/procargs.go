package proc

import (
	"bytes"
	"encoding/binary"
)

// parseProcArgs2 splits the macOS kern.procargs2 buffer into argv and the
// markerVars. It lives in a portable file so it is tested on every OS.
//
// Layout: a 4-byte native-endian (little on every supported Mac) argc, the
// exec path, NUL padding, argc NUL-terminated arguments, then the
// environment and the kernel's "apple" strings, all KEY=VALUE. Only marker
// keys are copied out of the environment part, so the apple strings and the
// secrets around them are never turned into strings.
func parseProcArgs2(b []byte) (argv []string, env map[string]string, ok bool) {
	if len(b) < 4 {
		return nil, nil, false
	}
	argc := int(binary.LittleEndian.Uint32(b))
	b = b[4:]
	// Skip the exec path and the padding after it.
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return nil, nil, false
	}
	b = b[i:]
	for len(b) > 0 && b[0] == 0 {
		b = b[1:]
	}
	for ; argc > 0 && len(b) > 0; argc-- {
		i := bytes.IndexByte(b, 0)
		if i < 0 {
			argv = append(argv, string(b))
			b = nil
			break
		}
		argv = append(argv, string(b[:i]))
		b = b[i+1:]
	}
	return argv, envMarkers(b), true
}
