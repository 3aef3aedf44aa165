// Package streams reads DynamoDB streams through their API and turns their
// records into the decoder's: for replaying a range of records that a
// stream mapping gave up on, and for the local event source mapping.
package streams
