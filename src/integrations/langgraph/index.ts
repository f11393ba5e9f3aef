export { CairnSaver, type CairnSaverOptions } from './cairn-saver.js'
