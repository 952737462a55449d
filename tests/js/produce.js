// An idempotent KafkaJS producer (acks=-1) sends --count keyed records with headers to
// --topic in sends of --batch records; prints each send's base offsets and where every
// record went (the partition KafkaJS's default partitioner chose for its key).
'use strict'

const { options, kafka, recordingPartitioner, main } = require('./common')

main(async () => {
  const opts = options(['bootstrap', 'topic', 'count'])
  const count = Number(opts.count)
  const batch = Number(opts.batch || 10)
  const chosen = new Map() // key -> partition
  const producer = kafka(opts.bootstrap, 'kafkajs-producer').producer({
    idempotent: true,
    createPartitioner: recordingPartitioner(chosen),
  })
  await producer.connect()
  const sends = []
  const records = []
  for (let start = 0; start < count; start += batch) {
    const messages = []
    for (let seq = start; seq < Math.min(start + batch, count); seq++) {
      messages.push({
        key: `key-${seq}`,
        value: `value-${seq}`,
        headers: { seq: `${seq}`, source: 'kafkajs', tag: ['a', 'b'] },
      })
    }
    const metadata = await producer.send({ topic: opts.topic, acks: -1, messages })
    sends.push(
      metadata.map(m => ({
        partition: m.partition,
        error_code: m.errorCode,
        base_offset: m.baseOffset,
        log_append_time: m.logAppendTime,
        log_start_offset: m.logStartOffset,
      }))
    )
    // Within one send, a partition's records are appended in the order given, from its
    // base offset.
    const next = new Map(metadata.map(m => [m.partition, Number(m.baseOffset)]))
    for (const message of messages) {
      const partition = chosen.get(message.key)
      records.push({ key: message.key, value: message.value, partition, offset: next.get(partition) })
      next.set(partition, next.get(partition) + 1)
    }
  }
  await producer.disconnect()
  return { sends, records }
})
