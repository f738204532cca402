// Package shell quotes words for sh, for the command lines sessiond
// writes for a shell to run (tmux's pipe-pane, an agent's hook command).
package shell

import "strings"

// Quote quotes s as one sh word: as it is when it holds only characters
// sh takes literally, else in single quotes.
func Quote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+:@%=,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
