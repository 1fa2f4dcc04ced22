//go:build amd64 && !purego && !linux

package bf16

import "fmt"

func requestTilePermission() error {
	return fmt.Errorf("AMX: asking the OS for the tile state is implemented for Linux only: %w", ErrNoFeature)
}
