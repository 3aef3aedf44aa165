//go:build !race

package hostile

// raceFactor multiplies the CPU bounds under the race detector.
const raceFactor = 1
