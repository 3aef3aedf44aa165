package worker

// Outcome is what became of a batch, whatever its source: the records to
// retry — neither done nor parked — once each, in batch order, with why
// each failed. Each front end turns it into its source's answer: batch item
// failures for Lambda's SQS and stream event sources, a failed invoke for
// SNS, messages handed back for the poller.
type Outcome struct {
	Retry []Failed
}

// Failed is a record to retry and its error.
type Failed struct {
	Record string
	Err    error
}

// retry adds a record to retry, once: a record two deliveries share fails
// once.
func (o *Outcome) retry(id string, err error) {
	for _, f := range o.Retry {
		if f.Record == id {
			return
		}
	}
	o.Retry = append(o.Retry, Failed{id, err})
}

// IDs are the records to retry.
func (o Outcome) IDs() []string {
	ids := make([]string, len(o.Retry))
	for i, f := range o.Retry {
		ids[i] = f.Record
	}
	return ids
}
