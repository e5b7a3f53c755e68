const { src, dest, parallel } = require('gulp');

// tsc emits only JavaScript; n8n loads icons and codex files from dist/ next to the code.
function nodeAssets() {
	return src('nodes/**/*.{png,svg,json}').pipe(dest('dist/nodes'));
}

function credentialIcons() {
	return src('credentials/**/*.{png,svg}').pipe(dest('dist/credentials'));
}

exports['build:icons'] = parallel(nodeAssets, credentialIcons);
