// The trusted side of a JavaScript split run: runs the tests, never a line of the program.
//
// Started by the sandbox server as `node -e BOOT`, with this file (after split_channel.js) and the
// run's texts in a memfd on descriptor 0; descriptors 3 and 4 are the pipes from and to the
// candidate process (split_candidate.js), 5 the pipe the outcome goes to, which only this process
// and the server hold. Every name the tests use that neither they, the benchmark's helpers nor
// this engine's globals define is asked of the program, once, before the tests start: functions
// and objects come back as handles (Proxies whose every use is a request), plain data as copies.
// Each `console.assert(` of the tests' text is a counted check of this side; the outcome is
// {passed, tests_passed, tests_total, delegated, error}.
/* global editforgeChannel, editforgeCodec, editforgeProxies, payload */
'use strict';

const fs = require('fs');
const OUTCOME_FD = 5;
const MAX_NESTING = 48;
const channel = editforgeChannel(fs, 3, 4);
let broken = null; // the protocol broke: the run cannot pass, whatever the tests catch
let delegated = 0;
let nesting = 0;
const callbacks = [];

class Broken extends Error {}

const breakRun = (why) => {
  if (broken === null) { broken = why; }
  throw new Broken(why);
};

const handles = new Map(); // candidate id -> our Proxy: one Proxy per object, so === works
const ids = new WeakMap(); // our Proxy -> candidate id
const codec = editforgeCodec(
  (value) => {
    if (ids.has(value)) { return { $: 'h', id: ids.get(value) }; }
    if (typeof value === 'function') {
      callbacks.push(value);
      return { $: 'cb', id: callbacks.length - 1 };
    }
    throw new TypeError(`a ${Object.prototype.toString.call(value)} of the tests cannot be passed to the program`);
  },
  (data) => {
    if (data.$ !== 'h' || !Number.isInteger(data.id) || data.id < 0) { breakRun('a malformed handle from the program'); }
    return handle(data.id, data.fn === true);
  },
);

const standIn = (error) => {
  const kinds = { TypeError, RangeError, SyntaxError, ReferenceError, EvalError, URIError };
  const name = error && typeof error.name === 'string' ? error.name : 'Error';
  const made = new (Object.prototype.hasOwnProperty.call(kinds, name) ? kinds[name] : Error)(
    error && typeof error.message === 'string' ? error.message : '',
  );
  if (!Object.prototype.hasOwnProperty.call(kinds, name)) { made.name = name.slice(0, 200); }
  return made;
};

// One request to the candidate; its callbacks into the tests are answered while we wait.
const request = (message, containers = []) => {
  if (broken !== null) { throw new Broken(broken); }
  if (++nesting > MAX_NESTING) { nesting--; breakRun(`calls nested more than ${MAX_NESTING} deep`); }
  try {
    channel.send(message);
    for (;;) {
      let reply;
      try {
        reply = channel.receive();
      } catch (err) {
        breakRun(`the program broke the protocol: ${err.message}`);
      }
      if (reply.op === 'callback') { answerCallback(reply); continue; }
      if (!('reply' in reply)) { breakRun('an unexpected message from the program'); }
      const answer = reply.reply;
      if (answer === null || typeof answer !== 'object') { breakRun('a malformed answer from the program'); }
      if ('error' in answer) { throw standIn(answer.error); }
      const value = codec.decode(answer.value);
      if (Array.isArray(answer.args)) {
        containers.forEach((target, i) => {
          if (target !== null && answer.args[i] !== undefined) { codec.replaceContents(target, codec.decode(answer.args[i])); }
        });
      }
      return value;
    }
  } finally {
    nesting--;
  }
};

const answerCallback = (message) => {
  const callback = Number.isInteger(message.id) ? callbacks[message.id] : undefined;
  if (callback === undefined || !Array.isArray(message.args)) { breakRun('a call of no callback of the tests'); }
  let answer;
  try {
    answer = { value: codec.encode(callback(...message.args.map((a) => codec.decode(a)))) };
  } catch (err) {
    if (err instanceof Broken || err instanceof AssertionFailure) { throw err; }
    answer = { error: { name: err && err.name, message: err && String(err.message) } };
  }
  channel.send({ reply: answer });
};

const call = (id, self, args) => {
  const containers = args.map((a) => (codec.isContainer(a) ? a : null));
  return request({ op: 'call', f: id, this: codec.encode(self), args: args.map((a) => codec.encode(a)) }, containers);
};

const handle = (id, callable) => {
  if (handles.has(id)) { return handles.get(id); }
  const target = callable ? function handle_() {} : {}; // eslint-disable-line func-names
  const traps = {
    get(_, key) {
      if (typeof key === 'symbol') {
        if (key === Symbol.toPrimitive) {
          return (hint) => { delegated++; return request({ op: 'prim', h: id, hint: String(hint) }); };
        }
        if (key === Symbol.iterator) {
          return function* iterate() { yield* request({ op: 'iter', h: id }); };
        }
        return undefined;
      }
      return request({ op: 'get', h: id, key });
    },
    set(_, key, value) {
      if (typeof key === 'symbol') { return false; }
      request({ op: 'set', h: id, key, value: codec.encode(value) });
      return true;
    },
    has(_, key) { return typeof key === 'string' && request({ op: 'has', h: id, key }) === true; },
    deleteProperty(_, key) { return typeof key === 'string' && request({ op: 'del', h: id, key }) === true; },
    ownKeys() {
      const keys = request({ op: 'keys', h: id });
      if (!Array.isArray(keys) || !keys.every((k) => typeof k === 'string')) { breakRun('malformed keys from the program'); }
      return [...new Set([...keys, ...Reflect.ownKeys(target).filter((k) => !Reflect.getOwnPropertyDescriptor(target, k).configurable)])];
    },
    getOwnPropertyDescriptor(_, key) {
      const own = Reflect.getOwnPropertyDescriptor(target, key);
      if (own && !own.configurable) { return own; }
      if (typeof key !== 'string' || request({ op: 'has', h: id, key }) !== true) { return undefined; }
      return { value: request({ op: 'get', h: id, key }), writable: true, enumerable: true, configurable: true };
    },
    getPrototypeOf() { return callable ? Function.prototype : Object.prototype; },
    setPrototypeOf() { return false; },
    defineProperty() { return false; },
    apply(_, self, args) { return call(id, self, args); },
    construct(_, args) {
      const made = request({ op: 'new', f: id, args: args.map((a) => codec.encode(a)) });
      if (made === null || (typeof made !== 'object' && typeof made !== 'function')) { breakRun('a constructor answered no object'); }
      return made;
    },
  };
  const proxy = new Proxy(target, traps);
  editforgeProxies.add(proxy);
  handles.set(id, proxy);
  ids.set(proxy, id);
  return proxy;
};

// The names the tests' text uses: identifiers outside strings and comments, not after a dot.
const KEYWORDS = new Set(('break case catch class const continue debugger default delete do else export extends '
  + 'false finally for function if import in instanceof let new null of return static super switch this throw '
  + 'true try typeof var void while with yield async await undefined NaN Infinity arguments eval').split(' '));
const usedNames = (text) => {
  const names = new Set();
  const token = /\/\/[^\n]*|\/\*[\s\S]*?\*\/|'(?:\\[\s\S]|[^'\\\n])*'|"(?:\\[\s\S]|[^"\\\n])*"|`(?:\\[\s\S]|[^`\\])*`|(\.\s*)?([A-Za-z_$][\w$]*)/g;
  let match;
  while ((match = token.exec(text)) !== null) {
    if (match[0][0] === '`') { usedNames(match[0].slice(1, -1)).forEach((n) => names.add(n)); } // ${...} inside: asking too many is harmless
    if (match[2] !== undefined && match[1] === undefined && !KEYWORDS.has(match[2])) { names.add(match[2]); }
  }
  return names;
};
// The names the tests declare with const, let or class at the start of a line (their top level): a
// program that binds one of them would not compile in one file with them, as bigcode runs it.
const lexicalNames = (text) => [...text.matchAll(/^(?:const|let|class)\s+([A-Za-z_$][\w$]*)/gm)].map((m) => m[1]);
const declaredNames = (text) => new Set(
  [...text.matchAll(/\b(?:const|let|var|function\*?|class)\s+([A-Za-z_$][\w$]*)/g)].map((m) => m[1]),
);

class AssertionFailure extends Error {}

const main = () => {
  const texts = payload;
  let site = 0;
  // __editforge_begin(i) runs before the check's own arguments: a check whose arguments throw (the
  // program raised on a loop's second input, say) is cut short, and did not hold that time
  const tests = texts.tests.replace(/console\.assert\(/g, () => {
    const at = site++;
    return `__editforge_check(__editforge_begin(${at}), `;
  });
  const total = site;
  const held = new Array(total).fill(null); // per check: null (never ran), true (held each time), false
  const running = []; // checks whose arguments are being evaluated, innermost last
  let refuted = 0; // checks that were false: a correct program fails none, caught or not
  const begin = (index) => { running.push(index); return index; };
  const check = (index, ok, ...message) => {
    while (running.length > 0) { // checks begun inside this one's arguments and never made were cut short
      const begun = running.pop();
      if (begun === index) { break; }
      held[begun] = false;
    }
    if (broken !== null) { throw new Broken(broken); }
    if (!ok) {
      held[index] = false;
      refuted += 1;
      throw new AssertionFailure(`Assertion failed ${message.map(String).join(' ')}`.trim());
    }
    if (held[index] === null) { held[index] = true; }
  };
  console.assert = (ok, ...message) => { if (!ok) { throw new AssertionFailure(`Assertion failed ${message.join(' ')}`.trim()); } };
  const local = new Set([
    ...declaredNames(texts.helpers), ...declaredNames(tests), '__editforge_check', '__editforge_begin',
  ]);
  const wanted = [...usedNames(texts.helpers + '\n' + tests)].filter((n) => !local.has(n) && !(n in globalThis));
  let outcome;
  try {
    const loaded = request({ op: 'load', names: wanted, declared: lexicalNames(tests) });
    if (loaded === null || typeof loaded !== 'object' || !Array.isArray(loaded.clashes)) { breakRun('a malformed list of names'); }
    if (loaded.clashes.length > 0) {
      throw new SyntaxError(`Identifier '${String(loaded.clashes[0]).slice(0, 100)}' has already been declared `
        + '(the program binds a name the tests declare: in one file they do not compile)');
    }
    const found = loaded.names;
    if (found === null || typeof found !== 'object' || Array.isArray(found)) { breakRun('a malformed list of names'); }
    const names = wanted.filter((n) => Object.prototype.hasOwnProperty.call(found, n));
    const run = new Function('__editforge_check', '__editforge_begin', ...names, `${texts.helpers}\n;{\n${tests}\n}`);
    run(check, begin, ...names.map((n) => found[n]));
    if (broken !== null) { throw new Broken(broken); }
    if (refuted > 0) { throw new AssertionFailure('a check of the tests failed and its error was caught'); }
    outcome = { passed: true };
  } catch (err) {
    const why = broken !== null ? broken : `${err && err.name ? err.name : 'Error'}: ${err && err.message}`;
    outcome = { passed: false, error: why, kind: err instanceof RangeError && /memory/i.test(String(err.message)) ? 'memory' : undefined };
  }
  outcome.passed = outcome.passed && broken === null;
  outcome.tests_total = total;
  for (const begun of running) { held[begun] = false; } // cut short when the run ended
  outcome.tests_passed = held.filter((h) => h === true).length;
  outcome.delegated = delegated;
  if (typeof outcome.error === 'string') { outcome.error = outcome.error.slice(0, 2000); }
  fs.writeSync(OUTCOME_FD, JSON.stringify(outcome));
  fs.closeSync(OUTCOME_FD); // the server reads to the end of file: the outcome is complete
  try { channel.send({ op: 'exit' }); } catch (err) { /* the candidate is gone: nothing to end */ }
};

main();
