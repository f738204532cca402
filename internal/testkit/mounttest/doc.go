// Package mounttest mounts the file systems on which stat(2) and the
// kernel's lock table name a file's device differently: an
// overlayfs whose layers are on two different tmpfs, and a btrfs
// subvolume. Mounting needs root and Linux; the helpers return an error
// that says why they could not, for the caller to skip loudly with.
package mounttest
