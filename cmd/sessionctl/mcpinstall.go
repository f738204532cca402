package main

import "github.com/spf13/cobra"

func mcpInstallCommands(a *app) []*cobra.Command { return nil }
