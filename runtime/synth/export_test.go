package synth

import "github.com/synthgen/synthgen/runtime/model"

// NetworkOf is m's network, for the tests of package synth_test.
func NetworkOf(m *Model) *model.Model { return m.net }

// SetLayerHook makes r call f at each check of its interrupt between
// layers, for the tests of package synth_test.
func SetLayerHook(r *Run, f func()) { r.layerHook = f }
