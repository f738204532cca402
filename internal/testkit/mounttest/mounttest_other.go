//go:build !linux

package mounttest

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
)

// Overlay fails: overlayfs is Linux's.
func Overlay(t testing.TB) (string, error) {
	return "", fmt.Errorf("overlayfs is Linux's (GOOS=%s): %w", runtime.GOOS, errors.ErrUnsupported)
}

// Btrfs fails: btrfs is Linux's.
func Btrfs(t testing.TB) (string, error) {
	return "", fmt.Errorf("btrfs is Linux's (GOOS=%s): %w", runtime.GOOS, errors.ErrUnsupported)
}
