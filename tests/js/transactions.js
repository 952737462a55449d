// Transactions with KafkaJS, on partition 0 of each topic:
//   commit/abort: a transactional producer commits 10 records (committed-i) and aborts 5 it
//     has sent (aborted-i);
//   send offsets: 6 records go to --input; a group member reads 3, and a transaction writes
//     them transformed to --output with the position (transaction.sendOffsets) and aborts;
//     the member reads the same 3 again and a second transaction commits. The group's
//     committed offset in and after each transaction (admin.fetchOffsets, not waiting for
//     stable offsets);
//   fence: a zombie sends in a transaction, a producer of the same transactional id
//     initialises (aborting it) and commits its own; the zombie's commit fails.
// Each topic is then read by a consumer with readUncommitted false and one with true, each
// until a plain record sent after everything (so every earlier record has been handed over).
'use strict'

const { options, kafka, waitFor, describeError, text, main } = require('./common')

const TIMEOUT_MS = 30000
const SENTINEL = 'end'

main(async () => {
  const opts = options(['bootstrap', 'topic', 'input', 'output', 'group'])
  const client = kafka(opts.bootstrap, 'kafkajs-transactions')
  const admin = client.admin()
  const plain = client.producer({ idempotent: true })
  await Promise.all([admin.connect(), plain.connect()])

  function transactional(transactionalId) {
    return client.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 })
  }
  const values = (prefix, count) => [...Array(count).keys()].map(i => ({ value: `${prefix}-${i}`, partition: 0 }))

  // Every value of partition 0 a consumer of this isolation is handed, up to the sentinel.
  async function read(topic, readUncommitted) {
    await plain.send({ topic, acks: -1, messages: [{ value: SENTINEL, partition: 0 }] })
    const groupId = `${topic}-reader-${readUncommitted ? 'uncommitted' : 'committed'}-${Date.now()}`
    const consumer = client.consumer({ groupId, readUncommitted, maxWaitTimeInMs: 100 })
    const read = []
    await consumer.connect()
    try {
      await consumer.subscribe({ topics: [topic], fromBeginning: true })
      await consumer.run({ autoCommit: false, eachMessage: async ({ message }) => read.push(text(message.value)) })
      await waitFor(() => read.includes(SENTINEL), TIMEOUT_MS, `${SENTINEL} in ${topic}, read ${read}`)
    } finally {
      await consumer.disconnect()
    }
    return read.filter(v => v !== SENTINEL)
  }
  async function readBoth(topic) {
    return { read_committed: await read(topic, false), read_uncommitted: await read(topic, true) }
  }
  async function committed(topic) {
    const [offsets] = await admin.fetchOffsets({ groupId: opts.group, topics: [topic] })
    return Number(offsets.partitions.find(p => p.partition === 0).offset)
  }

  // Commit 10, abort 5.
  const committer = transactional('kafkajs-committer')
  await committer.connect()
  const commit = await committer.transaction()
  await commit.send({ topic: opts.topic, acks: -1, messages: values('committed', 10) })
  await commit.commit()
  const abort = await committer.transaction()
  await abort.send({ topic: opts.topic, acks: -1, messages: values('aborted', 5) }) // in the log
  await abort.abort()
  await committer.disconnect()
  const commitAbort = await readBoth(opts.topic)

  // Consume-transform-produce, the offsets in the transaction.
  await plain.send({ topic: opts.input, acks: -1, messages: values('in', 6) })
  const member = client.consumer({ groupId: opts.group, maxWaitTimeInMs: 100, maxBytesPerPartition: 1 })
  const transformer = transactional('kafkajs-transformer')
  await Promise.all([member.connect(), transformer.connect()])
  const sendOffsets = {}
  try {
    await member.subscribe({ topics: [opts.input], fromBeginning: true })
    let batch = []
    await member.run({
      autoCommit: false,
      eachMessage: async ({ message }) => {
        // Three at a time: the member pauses until the transaction has them.
        if (batch.length < 3) batch.push({ value: text(message.value), offset: Number(message.offset) })
        if (batch.length === 3) member.pause([{ topic: opts.input }])
      },
    })
    for (const outcome of ['abort', 'commit']) {
      await waitFor(() => batch.length === 3, TIMEOUT_MS, `3 records of ${opts.input}, have ${batch.length}`)
      const transaction = await transformer.transaction()
      const messages = batch.map(r => ({ value: `out-${r.value}`, partition: 0 }))
      await transaction.send({ topic: opts.output, acks: -1, messages })
      const next = batch[2].offset + 1
      await transaction.sendOffsets({
        consumerGroupId: opts.group,
        topics: [{ topic: opts.input, partitions: [{ partition: 0, offset: `${next}` }] }],
      })
      const during = await committed(opts.input)
      await (outcome === 'commit' ? transaction.commit() : transaction.abort())
      // EndTxn is answered before the markers are written: the group has the offset once
      // its coordinator has the marker.
      if (outcome === 'commit') await waitFor(async () => (await committed(opts.input)) === next, TIMEOUT_MS, 'the offset committed')
      sendOffsets[outcome] = { read: batch.map(r => r.value), next, during, after: await committed(opts.input) }
      // As an application does after an abort: back to the group's committed position.
      batch = []
      member.seek({ topic: opts.input, partition: 0, offset: '0' })
      member.resume([{ topic: opts.input }])
    }
  } finally {
    await Promise.all([member.disconnect(), transformer.disconnect()])
  }
  sendOffsets.output = await readBoth(opts.output)

  // Fencing.
  const zombie = transactional('kafkajs-fenced')
  await zombie.connect()
  const open = await zombie.transaction()
  await open.send({ topic: opts.output + '-fence', acks: -1, messages: [{ value: 'zombie', partition: 0 }] })
  const successor = transactional('kafkajs-fenced')
  await successor.connect()
  const theirs = await successor.transaction()
  await theirs.send({ topic: opts.output + '-fence', acks: -1, messages: [{ value: 'successor', partition: 0 }] })
  await theirs.commit()
  await successor.disconnect()
  let zombieCommit = 'committed'
  try {
    await open.commit()
  } catch (error) {
    zombieCommit = describeError(error)
  }
  await zombie.disconnect()
  const fence = { zombie_commit: zombieCommit, ...(await readBoth(opts.output + '-fence')) }

  await Promise.all([admin.disconnect(), plain.disconnect()])
  return { commit_abort: commitAbort, send_offsets: sendOffsets, fence }
})
