// Package buildinfo says which build of sessiond is running, the same way
// for every command: sessiond reports it in /v1/health and --version,
// sessionctl in its version command.
package buildinfo

import "runtime/debug"

// Version returns stamped when the build set it (each command's
// -ldflags "-X main.version=..."); else the module version of a
// `go install module@version`; else "dev-" and the first 12 hex digits of
// the VCS revision the binary was built from; else "dev".
func Version(stamped string) string {
	if stamped != "" {
		return stamped
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			return bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return "dev-" + s.Value[:12]
			}
		}
	}
	return "dev"
}
