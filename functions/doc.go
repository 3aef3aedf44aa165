// Package functions holds one thin main per Lambda function and the poller,
// in its subdirectories. Its tests run the real binaries: the Lambda
// bootstraps under the Runtime Interface Emulator, fed events shaped like
// AWS's or by the local event source mapping driver, and the poller against
// moto.
package functions
