const __editforge_assert = (ok, ...msg) => { if (!ok) { throw new Error('Assertion failed ' + msg.join(' ')); } };
console.assert = __editforge_assert;
{ const M = require('module'); const load = M._load;
  M._load = function (name, ...rest) {
    if (name === 'js-md5') { return (s) => require('crypto').createHash('md5').update(s).digest('hex'); }
    return load.call(this, name, ...rest); }; }
