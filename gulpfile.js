const { src, dest } = require('gulp');

// tsc emits only JavaScript; n8n loads node and credential icons from dist/ next to the code.
function copyIcons() {
	const nodeIcons = src('nodes/**/*.{png,svg}');
	const nodeDestination = 'dist/nodes';
	nodeIcons.pipe(dest(nodeDestination));

	const credentialIcons = src('credentials/**/*.{png,svg}');
	return credentialIcons.pipe(dest('dist/credentials'));
}

function copyCodex() {
	return src('nodes/**/*.node.json').pipe(dest('dist/nodes'));
}

exports['build:icons'] = require('gulp').parallel(copyIcons, copyCodex);
