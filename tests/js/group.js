// Two KafkaJS consumers of one group on a --partitions topic: the first joins alone and
// is given everything; the second joins and they split the partitions; each reads the
// records of its own and commits them; the second disconnects (LeaveGroup) and the first
// is given its partitions, reading from where the second committed. Prints every
// assignment each member was given, what each read, and the group's committed offsets.
'use strict'

const { Partitioners } = require('kafkajs')
const { options, kafka, waitFor, headerPairs, text, describeError, main } = require('./common')

const TIMEOUT_MS = 30000
// Records carry their own create time, from 2023-11-14T22:13:20Z on.
const TIMESTAMP = 1700000000000

main(async () => {
  const opts = options(['bootstrap', 'topic', 'group', 'partitions', 'per-partition'])
  const { topic, group } = opts
  const partitions = Number(opts.partitions)
  const perPartition = Number(opts['per-partition'])
  const everything = [...Array(partitions).keys()]
  const client = kafka(opts.bootstrap, 'kafkajs-group')
  const admin = client.admin()
  const producer = client.producer({ idempotent: true, createPartitioner: Partitioners.DefaultPartitioner })
  await Promise.all([admin.connect(), producer.connect()])

  const members = {}
  async function join(name) {
    const consumer = client.consumer({
      groupId: group,
      sessionTimeout: 10000,
      rebalanceTimeout: 10000,
      heartbeatInterval: 300,
      maxWaitTimeInMs: 200,
    })
    const member = { consumer, assignments: [], read: [], crashes: [] }
    members[name] = member
    consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
      const owned = (payload.memberAssignment[topic] || []).slice().sort((a, b) => a - b)
      member.assignments.push(owned)
      member.memberId = payload.memberId
    })
    consumer.on(consumer.events.CRASH, ({ payload }) => member.crashes.push(describeError(payload.error)))
    await consumer.connect()
    await consumer.subscribe({ topics: [topic], fromBeginning: true })
    await consumer.run({
      eachMessage: async ({ partition, message }) => {
        member.read.push({
          partition,
          offset: Number(message.offset),
          timestamp: Number(message.timestamp),
          key: text(message.key),
          value: text(message.value),
          headers: headerPairs(message.headers),
        })
      },
    })
    return member
  }
  const latest = name => members[name].assignments.at(-1) || []

  async function produce(prefix) {
    const messages = []
    for (const partition of everything) {
      for (let i = 0; i < perPartition; i++) {
        const key = `${prefix}-${partition}-${i}`
        messages.push({
          key,
          value: `value-${key}`,
          partition,
          headers: { round: prefix, tag: ['a', 'b'] }, // a name twice: KafkaJS gives both
          timestamp: `${TIMESTAMP + partition * 1000 + i}`,
        })
      }
    }
    await producer.send({ topic, acks: -1, messages })
    return messages.map(m => m.key)
  }
  const readKeys = member => new Set(member.read.map(r => r.key))
  async function ends() {
    const offsets = await admin.fetchTopicOffsets(topic)
    return Object.fromEntries(offsets.map(o => [o.partition, Number(o.high)]))
  }

  async function committed() {
    const [offsets] = await admin.fetchOffsets({ groupId: group, topics: [topic] })
    return Object.fromEntries(offsets.partitions.map(p => [p.partition, Number(p.offset)]))
  }
  async function waitCommitted(expected, what) {
    const wanted = JSON.stringify(expected)
    await waitFor(async () => {
      const offsets = await committed()
      return JSON.stringify(Object.fromEntries(Object.keys(expected).map(p => [p, offsets[p]]))) === wanted
    }, TIMEOUT_MS, what)
  }

  const first = await join('first')
  await waitFor(() => latest('first').length === partitions, TIMEOUT_MS, 'the first member to own every partition')
  const alone = latest('first')

  const second = await join('second')
  const split = () => {
    const [a, b] = [latest('first'), latest('second')]
    return a.length > 0 && b.length > 0 && JSON.stringify([...a, ...b].sort((x, y) => x - y)) === JSON.stringify(everything)
  }
  await waitFor(split, TIMEOUT_MS, 'the two members to split the partitions')
  const splitAssignment = { first: latest('first'), second: latest('second') }

  const splitKeys = await produce('split')
  const splitEnds = await ends()
  await waitFor(
    () => splitKeys.every(k => readKeys(first).has(k) || readKeys(second).has(k)),
    TIMEOUT_MS,
    'every record of the split to be read'
  )
  await waitCommitted(splitEnds, 'the split\'s offsets to be committed')
  const splitRead = { first: first.read.slice(), second: second.read.slice() }
  const committedAfterSplit = await committed()

  const secondJoins = second.assignments.length
  await second.consumer.disconnect()
  await waitFor(
    () => latest('first').length === partitions && first.assignments.length > 1,
    TIMEOUT_MS,
    'the first member to take the second\'s partitions'
  )
  const afterLeave = latest('first')

  const readBefore = first.read.length
  const afterKeys = await produce('after-leave')
  const afterEnds = await ends()
  await waitFor(
    () => afterKeys.every(k => readKeys(first).has(k)),
    TIMEOUT_MS,
    'every record after the leave to be read'
  )
  await waitCommitted(afterEnds, 'the offsets after the leave to be committed')
  const committedAfterLeave = await committed()
  await first.consumer.disconnect()
  const described = await admin.describeGroups([group])
  await Promise.all([admin.disconnect(), producer.disconnect()])
  return {
    alone,
    split: splitAssignment,
    split_read: splitRead,
    ends_after_split: splitEnds,
    committed_after_split: committedAfterSplit,
    after_leave: afterLeave,
    after_leave_read: first.read.slice(readBefore),
    ends_after_leave: afterEnds,
    committed_after_leave: committedAfterLeave,
    assignments: { first: first.assignments, second: second.assignments },
    second_joins: secondJoins,
    member_ids: { first: first.memberId, second: second.memberId },
    crashes: { first: first.crashes, second: second.crashes },
    group_after: described.groups.map(g => ({ state: g.state, members: g.members.length })),
  }
})
