// The candidate side of a JavaScript split run: the program, and nothing of the tests'.
//
// Run as `node editforge_candidate.js` (this file after split_channel.js) in the work folder, next
// to main.js, the program. Descriptors 3 and 4 are the pipes from and to the trusted side
// (split_trusted.js), which asks for the program's top-level names, calls its functions and reads
// its objects; this side answers with plain data or handles. Nothing here is trusted: whatever the
// program does to this process changes only what it answers.
/* global editforgeChannel, editforgeCodec */
'use strict';

const fs = require('fs');
const path = require('path');
const Module = require('module');

const channel = editforgeChannel(fs, 3, 4);
const objects = []; // handle id -> the program's object
const ids = new Map();
const codec = editforgeCodec(
  (value) => {
    if (!ids.has(value)) { ids.set(value, objects.length); objects.push(value); }
    return { $: 'h', id: ids.get(value), fn: typeof value === 'function' };
  },
  (data) => {
    if (data.$ === 'h' && Number.isInteger(data.id) && data.id >= 0 && data.id < objects.length) { return objects[data.id]; }
    if (data.$ === 'cb' && Number.isInteger(data.id)) { return callback(data.id); }
    throw new TypeError('a malformed handle');
  },
);

// A function of the tests: the program may call it, and nothing else.
const callbacks = new Map();
const callback = (id) => {
  if (!callbacks.has(id)) {
    callbacks.set(id, (...args) => {
      channel.send({ op: 'callback', id, args: args.map((a) => codec.encode(a)) });
      return serve(true);
    });
  }
  return callbacks.get(id);
};

// The program as the module main.js, as in one process, with a lookup of its top-level names.
const load = (names, declared) => {
  const file = path.resolve('main.js');
  const source = fs.readFileSync(file, 'utf8');
  { // HumanEvalPack's JavaScript/162 requires js-md5: node's crypto stands in for it
    const original = Module._load;
    Module._load = function load_(name, ...rest) {
      if (name === 'js-md5') { return (s) => require('crypto').createHash('md5').update(s).digest('hex'); }
      return original.call(this, name, ...rest);
    };
  }
  const main = new Module(file, null);
  main.filename = file;
  main.paths = Module._nodeModulePaths(path.dirname(file));
  process.mainModule = main;
  let lookup = null;
  global.__editforge_scope = (fn) => { lookup = lookup || fn; };
  main._compile(`${source}\n;__editforge_scope((__editforge_name) => eval(__editforge_name));\n`, file);
  delete global.__editforge_scope;
  const valid = (name) => typeof name === 'string' && /^[A-Za-z_$][\w$]*$/.test(name);
  const binds = (name) => { try { lookup(name); return true; } catch (err) { return false; } };
  const clashes = declared.filter((name) => valid(name) && !(name in globalThis) && binds(name));
  const found = {};
  for (const name of names) {
    if (typeof name !== 'string' || !/^[A-Za-z_$][\w$]*$/.test(name)) { continue; }
    try {
      found[name] = lookup(name);
    } catch (err) {
      if (!(err instanceof ReferenceError)) { throw err; }
    }
  }
  return { found, clashes };
};

const toPrimitive = (object, hint) => {
  if (typeof object[Symbol.toPrimitive] === 'function') { return object[Symbol.toPrimitive](hint); }
  for (const method of hint === 'string' ? ['toString', 'valueOf'] : ['valueOf', 'toString']) {
    if (typeof object[method] === 'function') {
      const value = object[method]();
      if (value === null || (typeof value !== 'object' && typeof value !== 'function')) { return value; }
    }
  }
  throw new TypeError('Cannot convert object to primitive value');
};

const target = (message) => {
  if (!Number.isInteger(message.h) || message.h < 0 || message.h >= objects.length) { throw new TypeError('no such handle'); }
  return objects[message.h];
};

const answer = (message) => {
  switch (message.op) {
    case 'load': {
      const list = (key) => (Array.isArray(message[key]) ? message[key] : []);
      const { found, clashes } = load(list('names'), list('declared'));
      const names = { $: 'obj', v: Object.keys(found).map((k) => [k, codec.encode(found[k])]) };
      return { value: { $: 'obj', v: [['names', names], ['clashes', clashes]] } };
    }
    case 'call': {
      const fn = codec.decode({ $: 'h', id: message.f });
      const args = (Array.isArray(message.args) ? message.args : []).map((a) => codec.decode(a));
      const value = codec.encode(Reflect.apply(fn, codec.decode(message.this), args));
      return { value, args: args.map((a) => (codec.isContainer(a) ? codec.encode(a) : null)) };
    }
    case 'new': {
      const args = (Array.isArray(message.args) ? message.args : []).map((a) => codec.decode(a));
      return { value: codec.encode(Reflect.construct(codec.decode({ $: 'h', id: message.f }), args)) };
    }
    case 'get': return { value: codec.encode(target(message)[String(message.key)]) };
    case 'set': target(message)[String(message.key)] = codec.decode(message.value); return { value: true };
    case 'has': return { value: String(message.key) in Object(target(message)) };
    case 'del': return { value: delete target(message)[String(message.key)] };
    case 'keys': return { value: Reflect.ownKeys(target(message)).filter((k) => typeof k === 'string') };
    case 'prim': return { value: codec.encode(toPrimitive(target(message), message.hint)) };
    case 'iter': return { value: codec.encode([...target(message)]) };
    default: throw new TypeError(`unknown request ${String(message.op).slice(0, 40)}`);
  }
};

// Answer requests until the trusted side ends the run (or, inside a callback, answers it).
const serve = (inCallback) => {
  for (;;) {
    const message = channel.receive();
    if ('reply' in message && inCallback) {
      const reply = message.reply;
      if ('error' in reply) {
        const error = new Error(String(reply.error.message));
        error.name = String(reply.error.name);
        throw error;
      }
      return codec.decode(reply.value);
    }
    if (message.op === 'exit') { process.exit(0); }
    let reply;
    try {
      reply = answer(message);
    } catch (err) {
      reply = { error: { name: err && err.name, message: err && String(err.message) } };
    }
    channel.send({ reply });
  }
};

serve(false);
