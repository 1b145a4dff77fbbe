package inbox

import (
	"context"
	"fmt"
	"strconv"

	"github.com/IBM/sarama"
)

// Headers added to a dead-lettered message, next to all of its original
// headers. The key and value are the original message's.
const (
	HeaderDLQReason            = "dlq_reason" // one of the Reason… constants
	HeaderDLQError             = "dlq_error"  // the last error, as text
	HeaderDLQOriginalTopic     = "dlq_original_topic"
	HeaderDLQOriginalPartition = "dlq_original_partition"
	HeaderDLQOriginalOffset    = "dlq_original_offset"
	HeaderDLQConsumerGroup     = "dlq_consumer_group"
)

type deadLetterProducer struct {
	producer sarama.SyncProducer
	topic    string
	group    string
}

func (d *deadLetterProducer) send(_ context.Context, msg Message, reason string, cause error) error {
	headers := make([]sarama.RecordHeader, 0, len(msg.Headers)+6)
	add := func(k, v string) { headers = append(headers, sarama.RecordHeader{Key: []byte(k), Value: []byte(v)}) }
	for k, v := range msg.Headers {
		add(k, v)
	}
	add(HeaderDLQReason, reason)
	if cause != nil {
		add(HeaderDLQError, cause.Error())
	}
	add(HeaderDLQOriginalTopic, msg.Topic)
	add(HeaderDLQOriginalPartition, strconv.FormatInt(int64(msg.Partition), 10))
	add(HeaderDLQOriginalOffset, strconv.FormatInt(msg.Offset, 10))
	add(HeaderDLQConsumerGroup, d.group)
	pm := &sarama.ProducerMessage{Topic: d.topic, Value: sarama.ByteEncoder(msg.Data), Headers: headers}
	if msg.Subject != "" {
		pm.Key = sarama.StringEncoder(msg.Subject)
	}
	if _, _, err := d.producer.SendMessage(pm); err != nil {
		return fmt.Errorf("dead-lettering %s/%d/%d to %s: %w", msg.Topic, msg.Partition, msg.Offset, d.topic, err)
	}
	return nil
}
