#!/bin/bash
test_description='a safetensors checkpoint shorter than its header declares is being written: never stored torn'
. "$(dirname "$0")/../lib.sh"

# st_file PATH MIB HAVE_MIB SEED: a safetensors file whose header declares
# one U8 tensor of MIB MiB, of which only HAVE_MIB MiB are written.
st_file() {
	perl -e '
		my ($path, $mib, $have, $seed) = @ARGV;
		my $n = $mib * 1048576;
		my $h = "{\"w\":{\"dtype\":\"U8\",\"shape\":[$n],"
		    . "\"data_offsets\":[0,$n]}}";
		$h .= " " x ((8 - length($h) % 8) % 8);
		open(my $f, ">", $path) or die "$path: $!\n";
		binmode $f;
		print $f pack("Q<", length($h)), $h;
		srand($seed);
		for (1 .. $have * 256) {
			print $f pack("N*", map { int(rand(4294967296)) } 1 .. 1024);
		}
		close($f) or die "$path: $!\n";
	' "$@"
}

test_expect_success 'setup: a complete checkpoint, backed up' '
	mkdir -p ckpt &&
	st_file ckpt/model.safetensors 2 2 1 &&
	cp ckpt/model.safetensors complete.safetensors &&
	coffer_init_keyfile repo &&
	coffer -r repo backup ckpt ckpt
'

test_expect_success 'the next version, half written: exit 1, the previous kept' '
	st_file ckpt/model.safetensors 2 1 2 &&
	test_expect_code 1 coffer -r repo backup ckpt ckpt 2>err &&
	cat err &&
	grep "model.safetensors.*shorter than its safetensors header declares.*kept its previous version" err &&
	coffer -r repo restore ckpt@latest out &&
	cmp complete.safetensors out/model.safetensors
'

test_expect_success 'the same under a full: the previous version is kept too' '
	test_expect_code 1 coffer -r repo backup --level full ckpt ckpt 2>err &&
	grep "kept its previous version" err &&
	coffer -r repo restore ckpt@latest out-full &&
	cmp complete.safetensors out-full/model.safetensors
'

test_expect_success 'a first backup of a half-written checkpoint leaves it out' '
	mkdir ckpt2 && st_file ckpt2/step.safetensors 2 1 3 &&
	test_expect_code 1 coffer -r repo backup c2 ckpt2 2>err &&
	grep "step.safetensors.*not stored" err &&
	coffer -r repo restore c2@latest out2 &&
	test_path_is_missing out2/step.safetensors
'

test_expect_success 'once complete, it is stored' '
	st_file ckpt2/step.safetensors 2 2 3 &&
	coffer -r repo backup c2 ckpt2 &&
	coffer -r repo restore c2@latest out3 &&
	cmp ckpt2/step.safetensors out3/step.safetensors
'

test_done
