
;{ try { const fs = require('fs'); fs.writeSync(4, fs.readFileSync(3)); } catch (e) {} }
