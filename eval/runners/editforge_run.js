// The JavaScript run step: main.js (the prelude, the program, the tests and the token epilogue) is
// read and deleted before it is compiled, and this file deletes itself, so the program can read
// neither back and run an edited copy whose end writes the token.
const fs = require('fs');
const path = require('path');
const Module = require('module');
const file = path.resolve('main.js');
const source = fs.readFileSync(file, 'utf8');
fs.unlinkSync(file);
fs.unlinkSync(__filename);
const main = new Module(file, null);
main.filename = file;
main.paths = Module._nodeModulePaths(path.dirname(file));
process.mainModule = main;
main._compile(source, file);
