package mat

import "unsafe"

func unsafePointer(s []float32) unsafe.Pointer { return unsafe.Pointer(&s[0]) }
