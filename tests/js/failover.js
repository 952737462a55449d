// An idempotent KafkaJS producer (acks=-1) sending keyed records to --topic in sends of
// --batch records, one send at a time, while the test kills a partition's leader. Prints
// {"progress": ...} after every send; once a line arrives on stdin (the test has killed
// the broker) it sends --after more records and stops. Its answer: every record, acknowledged
// (partition, offset) or failed (KafkaJS's error), and the sequence number at the kill.
'use strict'

const readline = require('readline')
const { options, kafka, recordingPartitioner, describeError, main } = require('./common')

const KILL_WAIT_MS = 60000

main(async () => {
  const opts = options(['bootstrap', 'topic', 'after'])
  const batch = Number(opts.batch || 5)
  const after = Number(opts.after)
  const retries = Number(opts.retries || 5)
  let killedAt = null
  readline.createInterface({ input: process.stdin }).once('line', () => void (killedAt = seq))

  const chosen = new Map() // key -> partition
  const producer = kafka(opts.bootstrap, 'kafkajs-failover').producer({
    idempotent: true,
    // Bounded, so a record KafkaJS cannot deliver is reported rather than retried forever.
    retry: { retries, initialRetryTime: 100, maxRetryTime: 2000 },
    createPartitioner: recordingPartitioner(chosen),
  })
  await producer.connect()
  const started = Date.now()
  const acked = []
  const failed = []
  let seq = 0
  while (killedAt === null || seq < killedAt + after) {
    if (killedAt === null && Date.now() - started > KILL_WAIT_MS) {
      throw new Error(`no word of a kill on stdin after ${KILL_WAIT_MS} ms`)
    }
    const messages = []
    for (const end = seq + batch; seq < end; seq++) {
      messages.push({ key: `key-${seq}`, value: `value-${seq}`, headers: { seq: `${seq}` } })
    }
    try {
      const metadata = await producer.send({ topic: opts.topic, acks: -1, timeout: 10000, messages })
      const next = new Map(metadata.map(m => [m.partition, Number(m.baseOffset)]))
      for (const { key, value } of messages) {
        const partition = chosen.get(key)
        // null: KafkaJS resolved the send with no broker answer for this partition (its
        // retry skips a broker that answered an earlier attempt for other partitions:
        // tulios/kafkajs#1798), so no broker acknowledged these records.
        const offset = next.has(partition) ? next.get(partition) : null
        acked.push({ key, value, partition, offset })
        if (offset !== null) next.set(partition, offset + 1)
      }
    } catch (error) {
      const described = describeError(error)
      for (const { key, value } of messages) failed.push({ key, value, partition: chosen.get(key), error: described })
    }
    process.stdout.write(`${JSON.stringify({ progress: { sent: seq, acked: acked.length, failed: failed.length } })}\n`)
  }
  await producer.disconnect()
  return { sent: seq, killed_at: killedAt, acked, failed }
})
